//go:build !linux

package agent

import "time"

// threadCPU is not measured outside Linux (Config.PassCPU).
func threadCPU() (time.Duration, bool) { return 0, false }
