// Package rewrite owns the broker addresses a Kafka backend hands out and
// the API versions it advertises, as seen through the proxy.
//
// A client that learns an upstream address connects to it directly and
// leaves the proxy, and with it the ordering guarantee. Proxies that missed
// one place where addresses appear did exactly that (envoy #41222);
// kafka-proxy rewrote only Metadata and FindCoordinator, leaving
// DescribeCluster to a later patch (kafka-proxy #212) and the KIP-951
// endpoints of Produce and Fetch to clients (kafka-proxy #223). So Response
// rewrites every address in every response type kmsg v1.15.1 knows, through
// a Mapper that picks the proxy listener standing for each upstream node.
// Node ids are never changed, so partition leaders, replicas and
// coordinators keep pointing at the rewritten brokers.
//
// Rewritten fields, by API key and the versions that carry them:
//
//	 0 Produce           v10+ Brokers[].Host/Port (KIP-951, tag 0)
//	 1 Fetch             v16+ Brokers[].Host/Port (KIP-951, tag 0)
//	 3 Metadata          v0+  Brokers[].Host/Port
//	10 FindCoordinator   v0-3 Host/Port, v4+ Coordinators[].Host/Port;
//	                          only entries with ErrorCode 0 and NodeID >= 0
//	32 DescribeConfigs   v0+  config values (and synonyms) naming listeners,
//	                          the KRaft quorum or any upstream address; see
//	                          DescribeConfigs (an Addresser, not the Mapper)
//	52 Vote              v1+  NodeEndpoints[].Host/Port (tag 0, uint16 port)
//	53 BeginQuorumEpoch  v1+  NodeEndpoints[].Host/Port (tag 0, uint16 port)
//	54 EndQuorumEpoch    v1+  NodeEndpoints[].Host/Port (tag 0, uint16 port)
//	55 DescribeQuorum    v2+  Nodes[].Listeners[].Host/Port (uint16 port),
//	                          each mapped with its node's NodeID
//	59 FetchSnapshot     v1+  NodeEndpoints[].Host/Port (tag 0, uint16 port)
//	60 DescribeCluster   v0+  Brokers[].Host/Port (controllers when
//	                          EndpointType is 2)
//	78 ShareFetch        v0+  NodeEndpoints[].Host/Port
//	79 ShareAcknowledge  v0+  NodeEndpoints[].Host/Port
//	82 UpdateRaftVoter   v0+  CurrentLeader.Host/Port (tag 0), when
//	                          LeaderID >= 0
//
// Controller endpoints (keys 52-55, 59, 82, and DescribeCluster with
// EndpointType 2) go to Mapper.MapController, every other to MapNode.
//
// Keys 52-55, 59 and 82 are KRaft controller RPCs that clients rarely send;
// they are rewritten anyway because their endpoints are controller
// addresses, and a proxy in front of a controller quorum would otherwise
// leak them.
//
// Host fields left alone because they are not broker addresses:
// DescribeACLs (29) and DeleteACLs (31) ACL host patterns, the Kafka
// Streams application endpoints of StreamsGroupHeartbeat (88) and
// StreamsGroupDescribe (89), and the ClientHost of group members. A test
// walks every kmsg response type and fails if a new Host field appears
// that is in neither list.
//
// Needs tells the proxy which (key, version) pairs it must decode: the
// pairs above plus ApiVersions (18), whose advertised versions
// ClampVersions limits to what kmsg can parse (kafka-proxy #177).
package rewrite
