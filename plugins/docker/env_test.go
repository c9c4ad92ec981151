package docker

import (
	"reflect"
	"testing"
	"time"
)

func TestConfigFromEnvReadsEachSettingAndRejectsMalformedOnes(t *testing.T) {
	cases := []struct {
		name    string
		env     map[string]string
		want    Config
		wantErr bool
	}{
		{"nothing set keeps defaults", nil, Config{}, false},
		{"all set", map[string]string{EnvAllowPrivileged: "true", EnvLogMaxBytes: "1024", EnvLogMaxFiles: "3", EnvPullTimeout: "90s"},
			Config{AllowPrivileged: true, LogMaxBytes: 1024, LogMaxFiles: 3, PullTimeout: 90 * time.Second}, false},
		{"privileged off", map[string]string{EnvAllowPrivileged: "0"}, Config{}, false},
		{"bad bool", map[string]string{EnvAllowPrivileged: "yes please"}, Config{}, true},
		{"bad size", map[string]string{EnvLogMaxBytes: "10MB"}, Config{}, true},
		{"zero files", map[string]string{EnvLogMaxFiles: "0"}, Config{}, true},
		{"bad timeout", map[string]string{EnvPullTimeout: "-1m"}, Config{}, true},
		{"engine wait", map[string]string{EnvEngineWait: "2m"}, Config{EngineWait: 2 * time.Minute}, false},
		{"bad engine wait", map[string]string{EnvEngineWait: "0s"}, Config{}, true},
		{"allowed caps", map[string]string{EnvAllowCaps: "NET_ADMIN, cap_sys_time"}, Config{AllowCaps: []string{"net_admin", "sys_time"}}, false},
		{"bad caps", map[string]string{EnvAllowCaps: "net_admin,,"}, Config{}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := ConfigFromEnv(func(k string) string { return c.env[k] })
			if (err != nil) != c.wantErr {
				t.Fatalf("err %v, wantErr %v", err, c.wantErr)
			}
			if !c.wantErr && !reflect.DeepEqual(got, c.want) {
				t.Fatalf("got %+v, want %+v", got, c.want)
			}
		})
	}
}
