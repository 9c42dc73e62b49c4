// Package admin is the operator surface of a `shale serve` process: its Prometheus
// metrics (Metrics, in a registry of its own) and its HTTP admin endpoint (Server:
// /metrics, /healthz, /v1/status, /v1/tables/{name}). It holds no etcd code: the runtime
// (package serve) records what happens through Metrics' methods and answers the
// endpoint's questions through a Source it implements. The JSON types (Status,
// ExecutorInfo, AssignmentInfo, TableReport) are shared with `shale serve status` and
// `shale why`, and follow the CLI's --json conventions (docs/json.md). The runbook that
// reads these surfaces is docs/operations.md.
package admin
