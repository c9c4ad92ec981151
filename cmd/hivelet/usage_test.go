package main

import (
	"strings"
	"testing"
)

// TestUsageMistakesExitTwoWithTheUsageLine: an unknown subcommand (at the
// root and below it), a wrong argument count and an unknown flag are bad
// input with the command's usage; a bare command group prints its help and
// succeeds (control).
func TestUsageMistakesExitTwoWithTheUsageLine(t *testing.T) {
	cases := []struct {
		args []string
		want []string
	}{
		{[]string{"job", "bogus"}, []string{`unknown command "bogus" for "hivelet job"`, "usage: hivelet job COMMAND (one of: ", "validate"}},
		{[]string{"job", "valdate", "x.hcl"}, []string{`(did you mean "validate"?)`}},
		{[]string{"bogus"}, []string{`unknown command "bogus" for "hivelet"`, "usage: hivelet COMMAND"}},
		{[]string{"job", "inspect"}, []string{"accepts 1 arg(s), received 0", "usage: hivelet job inspect FILE"}},
		{[]string{"job", "status", "a", "b"}, []string{"accepts 1 arg(s), received 2", "usage: hivelet job status ID"}},
		{[]string{"job", "validate", "--nope", "x.hcl"}, []string{"unknown flag: --nope", "usage: hivelet job validate FILE"}},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			out, errOut, code := execJob(t, c.args...)
			if code != 2 {
				t.Fatalf("exit %d, want 2 (stdout %q, stderr %q)", code, out, errOut)
			}
			_, err := runErr(c.args)
			for _, w := range c.want {
				if !strings.Contains(err, w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
	out, _, code := execJob(t, "job")
	if code != 0 || !strings.Contains(out, "Available Commands") {
		t.Fatalf("bare group: exit %d, stdout %q", code, out)
	}
}

// runErr runs the root command and returns its error text.
func runErr(args []string) (int, string) {
	root := newRootCmd()
	root.SetArgs(args)
	var sink strings.Builder
	root.SetOut(&sink)
	root.SetErr(&sink)
	if err := root.Execute(); err != nil {
		return 1, err.Error()
	}
	return 0, ""
}

func TestAnErrorChainDoesNotRepeatItself(t *testing.T) {
	cases := map[string]string{
		"connecting to NATS at nats://h:4222 (is `hivelet agent` running?): connecting to NATS at nats://h:4222: nats: no servers": "connecting to NATS at nats://h:4222 (is `hivelet agent` running?): nats: no servers",
		"a: a: b": "a: b",
		// Controls: nothing repeated, or only the last segment alike.
		"reading job file: open x.hcl: no such file or directory": "reading job file: open x.hcl: no such file or directory",
		"stopping: stop":                   "stopping: stop",
		"web.hcl:3:1: bad\nusage: hivelet": "web.hcl:3:1: bad\nusage: hivelet",
	}
	for in, want := range cases {
		if got := dedupeChain(in); got != want {
			t.Errorf("dedupeChain(%q) = %q, want %q", in, got, want)
		}
	}
}
