// Command jsonpercent is the `percent` canary policy with a JSON input and
// answer, decoded with encoding/json: the naive encoding, kept to measure
// against ABI v1's binary one (BenchmarkEncodingInTheGuest). It implements
// its own two exports, not the hivelet ABI.
package main

import (
	"encoding/json"
	"runtime"
	"unsafe"
)

type node struct {
	ID         string            `json:"id"`
	Name       string            `json:"name"`
	Datacenter string            `json:"datacenter"`
	NodePool   string            `json:"node_pool"`
	Class      string            `json:"class"`
	Attributes map[string]string `json:"attributes"`
	Meta       map[string]string `json:"meta"`
}

type input struct {
	JobID        string            `json:"job_id"`
	DeploymentID string            `json:"deployment_id"`
	Count        int               `json:"count"`
	Params       map[string]string `json:"params"`
	Eligible     []node            `json:"eligible"`
	Existing     []string          `json:"existing"`
}

type output struct {
	NodeIDs []string `json:"node_ids"`
	Reason  string   `json:"reason"`
}

var in, out []byte

//go:wasmexport json_alloc
func alloc(n int32) int32 {
	in = make([]byte, n)
	return int32(uintptr(unsafe.Pointer(&in[0])))
}

//go:wasmexport json_canary
func canary(ptr, n int32) uint64 {
	var req input
	if err := json.Unmarshal(in[:n], &req); err != nil {
		panic(err)
	}
	ids := []string{}
	for i := 0; i < req.Count && i < len(req.Eligible); i++ {
		ids = append(ids, req.Eligible[i].ID)
	}
	out, _ = json.Marshal(output{NodeIDs: ids, Reason: "first nodes"})
	runtime.Gosched()
	return uint64(uintptr(unsafe.Pointer(&out[0])))<<32 | uint64(len(out))
}

func main() {}
