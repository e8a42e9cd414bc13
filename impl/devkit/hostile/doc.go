// Package hostile is tollgate's hostile-load run (`tollgate hostile`, `make hostile`). It is a
// tool, not part of the product: `tollgate serve` never links it.
//
// A run starts its own throwaway PostgreSQL cluster (impl/pgcluster), the upstream simulator
// (`tollgate sim`) and one `tollgate serve` process in processes of their own, so that the
// gateway's memory is its own. It drives steady normal traffic at the gateway (small chat
// completions on the fusion model service-flint, 50 a second by default) while it sends a burst
// of bad requests (1,000 by default, 16 at a time) at the same model:
//
//   - prompts of 20 to 30 MB, with and without a Content-Length, on /v1/chat/completions and
//     /v1/responses (beyond the context window);
//   - images of 20 to 30 MB as base64 data URLs (within the window: they reach the upstream);
//   - JSON nested deeper than any parser accepts, and nested as deep as it does;
//   - request heads of over 1 MiB;
//   - strings that are not valid UTF-8;
//   - bodies cut short: a connection closed half-way through a 20 to 30 MB body, and JSON
//     that ends early;
//   - slow senders: 3 to 5 MB sent at 1 MiB a second.
//
// It reports normal traffic's latency (p50, p99, max) and failures before, during and after the
// burst, the CPU time of the gateway, the simulator and the run's own clients during it, the
// bad requests' answers by kind, and the gateway's resident memory: before the burst, its peak
// (VmHWM of /proc/PID/status), at the end of the burst and a while after it. It checks them
// against the bounds docs/operations.md states: no normal request fails and their p99 stays
// under a second, no bad request gets a 5xx other than 503 or ends the process, the peak
// resident memory stays within the Go memory limit the gateway logged and 128 MiB (what Go does
// not count: the binary, thread stacks), and after the burst it is back under a quarter of the
// limit.
package hostile
