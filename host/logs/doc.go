// Package logs owns reading a task's output, and its node's whole record of
// an allocation, from any machine that can reach NATS: the request/reply
// protocol on the subject <prefix>.logs.<node_id>, the server an agent runs
// for its own node (Serve), and the client the CLI uses (Fetch, one
// request; Copy, the print-and-follow loop); and on <prefix>.alloc.<node_id>
// the details service (ServeDetails, FetchDetails): the allocation with
// every event of its tasks, which the allocations bucket carries only in
// part (allocrunner.ForWire). A details request is a lookup: it is answered
// on the subscription's goroutine, never blocks, and never reads a file.
//
// A request names an allocation, a task, stdout or stderr, a byte offset
// (negative: that many bytes before the end, a tail), a chunk size and a
// long-poll wait. The reply carries the bytes, the offset after them, the
// file's size and identity, and two flags: reset (the file was rotated or
// truncated under the reader: the data restarts at 0) and done (the
// allocation is terminal and the data reaches the end of the file).
//
// Usage (what `hivelet agent` and `hivelet alloc logs` do):
//
//	srv, _ := logs.Serve(nc, "hivelet", nodeID, agent.AllocFiles, log)
//	defer srv.Stop()
//	err := logs.Copy(ctx, nc, "hivelet", nodeID, logs.Request{AllocID: id, Task: "web"}, os.Stdout,
//		logs.CopyOptions{Follow: true, Notices: os.Stderr})
//
// Invariants:
//   - The server reads only the stdout and stderr files of a task of an
//     allocation its Resolver knows: the directory comes from the resolver,
//     the task must be one of the resolver's tasks, and the file path is
//     allocrunner.LogPaths of those. Nothing in a request is ever used as a
//     path; names that could not be an allocation ID or a task name ("../x",
//     "a/b") are refused before the resolver is asked
//     (TestPathTraversalIsRefused).
//   - The file is opened through an os.Root at the allocation's directory,
//     without blocking (O_NONBLOCK) and only if it is a regular file: a task
//     that replaces its log file with a symlink out of its allocation, or
//     with a FIFO, gets an error reply, not the target's bytes or a stuck
//     server (TestASymlinkOutOfTheAllocationIsNotFollowed).
//   - A missing file (the task has written nothing yet) is empty data, not
//     an error.
//   - Every request is handled in its own goroutine, at most maxInFlight at
//     once; over the bound the reply is an immediate "busy" error, never a
//     queue (TestOverTheBoundARequestIsToldBusy). A long poll never delays
//     another request (TestALongPollDoesNotBlockOtherRequests).
//   - A reply never exceeds the chunk limit (256 KiB, and less if the NATS
//     server's max_payload is smaller) of data, so it always fits a message.
//   - While connected, the NATS server has the subscription when Serve
//     returns, and has dropped it when Stop returns (a flush each time).
//     Stop also answers every long poll at once with what it has, and
//     returns when no handler runs (TestStopAnswersLongPollsAtOnce).
//
// Access control is NATS's: whoever may publish to <prefix>.logs.<node_id>
// (and receive replies on its inbox) may read every task's output on that
// node. Grant it as you would shell access to the logs.
//
// The operator's view is docs/agent.md ("Task logs over NATS").
package logs
