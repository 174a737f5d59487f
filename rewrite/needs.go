package rewrite

// Needs reports whether responses to requests with this key and version
// carry addresses or versions that Response or ClampVersions must rewrite.
//
// Version ranges are open upwards: a future version of an API that carries
// addresses is assumed to still carry them, so a proxy that forwards a
// version it cannot decode fails instead of leaking upstream addresses.
func Needs(key, version int16) bool {
	if version < 0 {
		return false
	}
	switch key {
	case 3, // Metadata
		10, // FindCoordinator
		18, // ApiVersions
		32, // DescribeConfigs: listener and quorum values
		60, // DescribeCluster
		78, // ShareFetch
		79, // ShareAcknowledge
		82: // UpdateRaftVoter
		return true
	case 0: // Produce: KIP-951 NodeEndpoints
		return version >= 10
	case 1: // Fetch: KIP-951 NodeEndpoints
		return version >= 16
	case 52, // Vote
		53, // BeginQuorumEpoch
		54, // EndQuorumEpoch
		59: // FetchSnapshot
		return version >= 1
	case 55: // DescribeQuorum
		return version >= 2
	}
	return false
}
