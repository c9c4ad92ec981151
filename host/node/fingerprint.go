package node

import (
	"bufio"
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"runtime"
	"strconv"
	"strings"

	"github.com/hivelet/hivelet/host/model"
)

// Attribute names set by Fingerprint.
const (
	AttrOS         = "os.name"
	AttrArch       = "cpu.arch"
	AttrCores      = "cpu.numcores"
	AttrMHz        = "cpu.frequency"
	AttrCPUModel   = "cpu.modelname"
	AttrTotalMHz   = "cpu.totalcompute"
	AttrMemory     = "memory.totalbytes"
	AttrKernel     = "kernel.version"
	AttrKernelName = "kernel.name"
	AttrHostname   = "unique.hostname"
)

// ProcFS returns the file system rooted at a proc mount (normally "/proc").
func ProcFS(root string) fs.FS { return os.DirFS(root) }

// Fingerprint returns the host attributes read from proc (an fs.FS rooted at
// /proc, so tests pass a fstest.MapFS) and the hostname. A file that cannot be
// read leaves its attributes out and is reported in the returned error, which
// is informational: the attributes returned are still good.
func Fingerprint(proc fs.FS, hostname string) (map[string]string, error) {
	attrs := map[string]string{
		AttrOS:         runtime.GOOS,
		AttrKernelName: runtime.GOOS,
		AttrArch:       runtime.GOARCH,
	}
	if hostname != "" {
		attrs[AttrHostname] = hostname
	}
	var errs []string
	if b, err := fs.ReadFile(proc, "cpuinfo"); err == nil {
		c := ParseCPUInfo(b)
		if c.Cores > 0 {
			attrs[AttrCores] = strconv.Itoa(c.Cores)
		}
		if c.MHz > 0 {
			attrs[AttrMHz] = strconv.Itoa(int(c.MHz))
			attrs[AttrTotalMHz] = strconv.Itoa(int(c.MHz) * max(c.Cores, 1))
		}
		if c.Model != "" {
			attrs[AttrCPUModel] = c.Model
		}
	} else {
		errs = append(errs, err.Error())
	}
	if attrs[AttrCores] == "" {
		attrs[AttrCores] = strconv.Itoa(runtime.NumCPU())
	}
	if b, err := fs.ReadFile(proc, "meminfo"); err == nil {
		if total := ParseMemInfo(b); total > 0 {
			attrs[AttrMemory] = strconv.FormatUint(total, 10)
		}
	} else {
		errs = append(errs, err.Error())
	}
	if b, err := fs.ReadFile(proc, "sys/kernel/osrelease"); err == nil {
		attrs[AttrKernel] = strings.TrimSpace(string(b))
	} else {
		errs = append(errs, err.Error())
	}
	if len(errs) > 0 {
		return attrs, fmt.Errorf("fingerprinting: %s", strings.Join(errs, "; "))
	}
	return attrs, nil
}

// CPUInfo is what ParseCPUInfo finds.
type CPUInfo struct {
	Cores int
	MHz   float64
	Model string
}

// ParseCPUInfo reads /proc/cpuinfo: the number of processor entries, the
// highest "cpu MHz" and the first "model name".
func ParseCPUInfo(b []byte) CPUInfo {
	var c CPUInfo
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		switch k {
		case "processor":
			c.Cores++
		case "cpu MHz":
			if f, err := strconv.ParseFloat(v, 64); err == nil && f > c.MHz {
				c.MHz = f
			}
		case "model name":
			if c.Model == "" {
				c.Model = v
			}
		}
	}
	return c
}

// ParseMemInfo returns MemTotal from /proc/meminfo, in bytes (0 if absent).
func ParseMemInfo(b []byte) uint64 {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || strings.TrimSpace(k) != "MemTotal" {
			continue
		}
		f := strings.Fields(v)
		if len(f) == 0 {
			return 0
		}
		n, err := strconv.ParseUint(f[0], 10, 64)
		if err != nil {
			return 0
		}
		if len(f) > 1 && strings.EqualFold(f[1], "kB") {
			n *= 1024
		}
		return n
	}
	return 0
}

// DriverSource gives the drivers' current fingerprints. The plugin manager
// implements it (host/agent wires it); a driver absent from the map is not
// detected.
type DriverSource interface {
	DriverFingerprints() map[string]model.DriverInfo
}

// Config is the operator's part of the node record (agent configuration).
type Config struct {
	Name       string
	Datacenter string
	NodePool   string
	Class      string
	Meta       map[string]string
	// Hostname is used as the name when Name is empty.
	Hostname string
}

// Defaults of the node record.
const (
	DefaultDatacenter = "dc1"
	DefaultNodePool   = "default"
)
