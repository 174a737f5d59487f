// Package bench measures what a Kafka proxy costs: a load generator built on
// kgo that runs the same workload against several bootstrap addresses round
// by round, a plain TCP relay that stands in for the ideal proxy, and
// embedded kfake brokers that discard produced records or serve synthetic
// fetches so that the broker is never the bottleneck. RunWide pipelines
// Produce requests of many partitions and few bytes on one connection, for
// a path whose work might follow the partitions rather than the bytes.
//
// On a small machine the client, the broker and the proxy share the same
// cores and a single run varies by ±15%, so every figure is taken as the
// median over rounds in which every path runs back to back, and ratios are
// the median of the per-round ratios.
package bench
