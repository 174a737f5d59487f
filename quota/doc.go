// Package quota owns Kafka's client quotas as the proxy enforces them:
// the `quotas:` entries of the config file (Config, ParseNode), the
// entity in force for a user and client id by Kafka's eight-level
// precedence (Resolver), the sliding-window rates and throttle times
// (Rate, ThrottleTime), the rates shared by every client of one entity
// (Manager, Client), the connection caps by address and by user and the
// connection creation rate by address (Conns), and which response
// versions make a client hold off by itself (ClientThrottles). It is pure:
// no sockets, no goroutines, a clock passed in; the proxy decides when to
// answer and when to stop reading a connection.
//
// The invariant it keeps: for the same records at the same instants, a
// client is throttled exactly when, and for exactly as long as, an Apache
// Kafka broker with the same quotas and its default windows (11 samples
// of one second) would throttle it.
//
// Quotas are per proxy, as Kafka's are per broker: N proxies in front of
// a cluster let a client through N times its quota if its connections
// spread over all of them.
//
// request_percentage is, as in Kafka, a percentage of one thread's time
// over the window (100 is one whole core); what the proxy counts is its
// own time spent on the client's requests (reading, classifying,
// forwarding and answering them), not the time they wait on the broker,
// which the broker's own request quota governs.
package quota
