package docker

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/hivelet/hivelet/sdk/driver"
)

// Environment variables that configure the driver inside its plugin process
// (the plugin inherits the agent's environment). DOCKER_HOST and the other
// variables of the Docker client are honoured too.
const (
	EnvAllowPrivileged = "HIVELET_DOCKER_ALLOW_PRIVILEGED" // "true" or "1"
	EnvLogMaxBytes     = "HIVELET_DOCKER_LOG_MAX_BYTES"    // bytes per log file
	EnvLogMaxFiles     = "HIVELET_DOCKER_LOG_MAX_FILES"    // rotated files kept
	EnvPullTimeout     = "HIVELET_DOCKER_PULL_TIMEOUT"     // e.g. "5m"
	EnvEngineWait      = "HIVELET_DOCKER_ENGINE_WAIT"      // e.g. "60s": Config.EngineWait
	// EnvAllowCaps lists the capabilities cap_add may name ("net_admin,
	// sys_time", or "all"); default DefaultAllowCaps.
	EnvAllowCaps = "HIVELET_DOCKER_ALLOW_CAPS"
)

// ConfigFromEnv reads the driver's configuration from getenv (os.Getenv in
// the plugin). Unset variables keep the defaults; a malformed one is an
// error naming it.
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	var c Config
	if v := getenv(EnvAllowPrivileged); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return c, fmt.Errorf("%s=%q: want true or false", EnvAllowPrivileged, v)
		}
		c.AllowPrivileged = b
	}
	if v := getenv(EnvLogMaxBytes); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			return c, fmt.Errorf("%s=%q: want a positive number of bytes", EnvLogMaxBytes, v)
		}
		c.LogMaxBytes = n
	}
	if v := getenv(EnvLogMaxFiles); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			return c, fmt.Errorf("%s=%q: want a positive count", EnvLogMaxFiles, v)
		}
		c.LogMaxFiles = n
	}
	if v := getenv(EnvAllowCaps); v != "" {
		for _, cp := range normalizeCaps(strings.Split(v, ",")) {
			if cp == "" || strings.ContainsAny(cp, " \t") {
				return c, fmt.Errorf("%s=%q: want a comma-separated list of capabilities, or all", EnvAllowCaps, v)
			}
			c.AllowCaps = append(c.AllowCaps, cp)
		}
	}
	if v := getenv(EnvPullTimeout); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return c, fmt.Errorf("%s=%q: want a positive duration", EnvPullTimeout, v)
		}
		c.PullTimeout = d
	}
	if v := getenv(EnvEngineWait); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return c, fmt.Errorf("%s=%q: want a positive duration", EnvEngineWait, v)
		}
		c.EngineWait = d
	}
	return c, nil
}

// NewFromEnv is the built-in registry's constructor: the driver configured
// by ConfigFromEnv(os.Getenv).
func NewFromEnv() (driver.Driver, error) {
	cfg, err := ConfigFromEnv(os.Getenv)
	if err != nil {
		return nil, fmt.Errorf("configuring the docker driver: %w", err)
	}
	return New(cfg)
}
