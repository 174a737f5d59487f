// Package ordering is the per-connection sequencer of inorder: pure logic,
// no sockets, driven by the proxy under the connection's lock.
//
// Every request read from a client is pushed in arrival order and receives a
// sequence number. The Sequencer decides when each request may be forwarded
// upstream (Dispatch) and releases responses strictly in sequence (Ready),
// whatever order the upstream completes them in.
//
// Modes:
//
//   - Connection: the upstream keeps per-connection order, so every request
//     is forwarded as soon as it is pushed; the proxy writes them to the one
//     upstream connection in sequence, which is what "accepted" means there.
//   - None: nothing is assumed. A Write (Produce, OffsetCommit,
//     TxnOffsetCommit) is forwarded once no earlier, uncompleted Write shares
//     one of its keys and no Barrier is pending or in flight before it. A
//     Barrier (every other request) is forwarded only when every earlier
//     request has completed, and nothing is forwarded while it is in flight.
//
// Invariants, checked by the property tests:
//
//  1. Ready yields each response-bearing request exactly once, in sequence
//     order, and never one whose request has not completed.
//  2. In None mode, two Writes sharing a key are never in flight together,
//     and a Barrier is never in flight with any other request.
//  3. In None mode Writes leave in sequence order per key: a Write is never
//     forwarded before an earlier Write that shares one of its keys.
//  4. Nothing leaks: once every request has completed and Ready has drained,
//     the Sequencer holds no entries, keys, or bytes.
//  5. Progress: when nothing is in flight and requests are pending, Dispatch
//     returns at least one.
//
// Keys are 64-bit hashes of what a write touches (a topic partition, or a
// group's committed partition). Two different partitions that collide only
// make their writes wait for each other: a collision can cost overlap, never
// order.
//
// Bounded state and work: a Write with more than MaxWriteKeys keys is
// sequenced as a Barrier, which keeps the same order without a key per
// partition; the keys of live writes are counted (KeyStateBytes each) in
// the bytes that Full compares with the connection's bound; and in None
// mode Push, Dispatch and Complete cost time proportional to the requests
// and keys they touch or release, never a rescan of everything pending.
//
// A request pushed with NoResponse (a Produce with acks=0) takes part in
// ordering but yields nothing from Ready; in Connection mode the proxy does
// not push it at all, so it leaves no state behind.
package ordering
