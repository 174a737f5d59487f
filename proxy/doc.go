// Package proxy is inorder's network side: the bootstrap and per-node
// listeners, one client connection with its own upstream connection, and
// the forwarding path between them.
//
// Each client connection is served by one goroutine reading the client, an
// upstream reader that runs only while a forwarded request awaits its
// response (an idle connection parks one goroutine), and a short-lived
// flusher when the upstream reader releases requests in None mode (the
// upstream reader never blocks on an upstream write, which would deadlock
// against a backend that stops reading until its responses are read). Requests are sequenced by package
// ordering; responses are written to the client by whichever goroutine
// completes the head of the sequence, one writer at a time (redpanda PR
// 25636 reordered responses with two racing writers).
//
// Frames are forwarded as the bytes they arrived in: the proxy patches the
// correlation id in place and decodes a body only when it must understand or
// rewrite it (Produce and commits in None mode, ApiVersions, and every
// response that carries broker addresses; see package rewrite).
package proxy
