package policy

import "github.com/hivelet/hivelet/internal/policywire"

// The module's exports (export_wasip1.go) run a registered function on an
// encoded input through these: decode strictly, call, encode the answer.
// A decoding failure or the function's error becomes an error answer.

// decodeCanaryInput decodes a canary input into the SDK's values; its
// nodes share the input's key tables, and their strings alias buf.
func decodeCanaryInput(buf []byte) (CanaryInput, error) {
	c, nodes, err := policywire.DecodeCanaryInput(buf, func(n *Node, f policywire.NodeFields, t *policywire.Tables, off int32) {
		*n = Node{ID: f.ID, Name: f.Name, Datacenter: f.Datacenter, NodePool: f.NodePool, Class: f.Class, keys: t, off: off}
	})
	if err != nil {
		return CanaryInput{}, err
	}
	return CanaryInput{JobID: c.JobID, JobVersion: c.JobVersion, DeploymentID: c.DeploymentID, Group: c.Group,
		Percent: c.Percent, Count: c.Count, Params: c.Params, Nodes: nodes, Existing: c.Existing}, nil
}

// decodeCompletionInput decodes a completion input into the SDK's values.
func decodeCompletionInput(buf []byte) (CompletionInput, error) {
	c, err := policywire.DecodeCompletionInput(buf)
	if err != nil {
		return CompletionInput{}, err
	}
	groups := make([]Group, len(c.Groups))
	for i, g := range c.Groups {
		groups[i] = Group(g) // the same fields: a change to either fails to compile
	}
	return CompletionInput{DeploymentID: c.DeploymentID, JobID: c.JobID, JobVersion: c.JobVersion, Status: c.Status,
		Disruption: c.Disruption, Now: c.Now, Params: c.Params, Groups: groups}, nil
}

// call answers one export call: decode the input, run the author's
// function, encode its answer, or an error message when any of it fails.
func call[I, O any](decode func([]byte) (I, error), fn func(I) (O, error), encode func([]byte, O) []byte, in, dst []byte) []byte {
	input, err := decode(in)
	if err != nil {
		return policywire.AppendError(dst, err.Error())
	}
	out, err := fn(input)
	if err != nil {
		return policywire.AppendError(dst, err.Error())
	}
	return encode(dst, out)
}

func callCanary(fn func(CanaryInput) (CanaryOutput, error), in []byte, dst []byte) []byte {
	return call(decodeCanaryInput, fn, func(dst []byte, out CanaryOutput) []byte {
		return policywire.AppendCanaryOutput(dst, policywire.CanaryOutput(out))
	}, in, dst)
}

func callCompletion(fn func(CompletionInput) (CompletionOutput, error), in []byte, dst []byte) []byte {
	return call(decodeCompletionInput, fn, func(dst []byte, out CompletionOutput) []byte {
		return policywire.AppendCompletionOutput(dst, policywire.CompletionOutput{Decision: policywire.Decision(out.Decision), Revert: out.Revert, Reason: out.Reason})
	}, in, dst)
}
