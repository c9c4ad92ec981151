package main

import (
	"bufio"
	"bytes"
	"embed"
	"errors"
	"fmt"
	"go/format"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"text/template"

	"github.com/spf13/cobra"
)

// This file is `hivelet policy init DIR` and `hivelet driver init DIR`:
// each writes a skeleton module (the code, a test, a README, a go.mod
// wired to a local hivelet checkout through a replace directive) that
// builds and passes its tests as generated
// (TestGeneratedSkeletonsBuildAndPassAsGenerated).

// skeletons holds the templates: skeletons/<kind>/<file>.tmpl, plus
// skeletons/go.mod.tmpl shared by every kind. The .tmpl suffix keeps the
// go.mod and Go templates out of this module's build.
//
//go:embed skeletons
var skeletons embed.FS

// sdkModule is the module path of the SDKs.
const sdkModule = "github.com/hivelet/hivelet"

// skeleton is what the templates are filled with.
type skeleton struct {
	Name      string // the policy's or driver's name
	Module    string // the generated module's path
	SDKDir    string // the absolute path of the hivelet checkout
	GoVersion string // the checkout's go directive
}

// skeletonFlags are the flags of both init commands.
type skeletonFlags struct {
	sdk, module string
	noTidy      bool
}

// newInitCmd is the `init DIR` subcommand writing the kind's skeleton.
func newInitCmd(kind, short, long string) *cobra.Command {
	f := &skeletonFlags{}
	cmd := &cobra.Command{
		Use:   "init DIR",
		Short: short,
		Long: long + "\nIts go.mod reaches the SDK with `replace github.com/hivelet/hivelet => <checkout>`\n" +
			"(the module is not on a proxy yet), then `go mod tidy` fetches the SDK's dependencies\n" +
			"from the module proxy.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return writeSkeleton(cmd, kind, args[0], f)
		},
	}
	cmd.Flags().StringVar(&f.sdk, "sdk", "", "the hivelet checkout the go.mod's replace points at (default: the one containing the working directory or this binary)")
	cmd.Flags().StringVar(&f.module, "module", "", "the new module's path (default example.com/<name>)")
	cmd.Flags().BoolVar(&f.noTidy, "no-tidy", false, "do not run go mod tidy in DIR (then run it yourself before building)")
	return cmd
}

func newPolicyInitCmd() *cobra.Command {
	return newInitCmd("policy",
		"Write a canary policy skeleton module in DIR that builds and passes its tests as generated",
		"Write a Go module in DIR (created if needed, and empty) holding a canary policy, a native\n"+
			"test, a test that builds the module and runs cases.json through the agent's engine, the\n"+
			"cases file and a README.")
}

// newDriverCmd is `hivelet driver`: tools for driver authors.
func newDriverCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "driver",
		Short: "Tools for driver plugin authors",
	}
	cmd.AddCommand(newInitCmd("driver",
		"Write a task driver skeleton module in DIR that builds and passes its tests as generated",
		"Write a Go module in DIR (created if needed, and empty) holding a driver plugin that runs\n"+
			"a task's command as a child process (it embeds driver.Base, so it writes only the task\n"+
			"life cycle), a test that builds it and drives it through the plugin manager as the agent\n"+
			"does, and a README."))
	return cmd
}

// nameRE is what a policy or driver name may be: it names a file
// (hivelet-driver-NAME, NAME.wasm) and a job file's driver or policy.
var nameRE = regexp.MustCompile(`^[a-z][a-z0-9_-]*$`)

func writeSkeleton(cmd *cobra.Command, kind, dir string, f *skeletonFlags) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return badInput(err)
	}
	name := strings.ToLower(filepath.Base(abs))
	if !nameRE.MatchString(name) {
		return badInput(fmt.Errorf("the directory's name %q is the %s's name, so it must match %s", name, kind, nameRE))
	}
	if ents, err := os.ReadDir(abs); err == nil && len(ents) > 0 {
		return badInput(fmt.Errorf("%s is not empty: init writes a new module and overwrites nothing", dir))
	}
	sdk, err := findSDK(f.sdk)
	if err != nil {
		return badInput(err)
	}
	goVersion, err := goDirective(filepath.Join(sdk, "go.mod"))
	if err != nil {
		return err
	}
	data := skeleton{Name: name, Module: f.module, SDKDir: sdk, GoVersion: goVersion}
	if data.Module == "" {
		data.Module = "example.com/" + name
	}
	files := map[string]string{"go.mod": "skeletons/go.mod.tmpl"}
	tmpls, err := fs.Glob(skeletons, "skeletons/"+kind+"/*.tmpl")
	if err != nil || len(tmpls) == 0 {
		return fmt.Errorf("no %s skeleton in this binary", kind)
	}
	for _, t := range tmpls {
		files[strings.TrimSuffix(path.Base(t), ".tmpl")] = t
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return err
	}
	w := cmd.OutOrStdout()
	for out, src := range files {
		text, err := skeletons.ReadFile(src)
		if err != nil {
			return err
		}
		t, err := template.New(src).Option("missingkey=error").Parse(string(text))
		if err != nil {
			return fmt.Errorf("skeleton template %s: %w", src, err)
		}
		var b bytes.Buffer
		if err := t.Execute(&b, data); err != nil {
			return fmt.Errorf("skeleton template %s: %w", src, err)
		}
		content := b.Bytes()
		if strings.HasSuffix(out, ".go") {
			if content, err = format.Source(content); err != nil {
				return fmt.Errorf("skeleton template %s: %w", src, err)
			}
		}
		if err := os.WriteFile(filepath.Join(abs, out), content, 0o644); err != nil {
			return err
		}
	}
	fmt.Fprintf(w, "wrote a %s skeleton in %s (module %s, SDK from %s)\n", kind, dir, data.Module, sdk)
	if !f.noTidy {
		tidy := exec.CommandContext(cmd.Context(), "go", "mod", "tidy")
		tidy.Dir = abs
		if out, err := tidy.CombinedOutput(); err != nil {
			return fmt.Errorf("go mod tidy in %s (the files are written; fix and run it again): %w\n%s", dir, err, out)
		}
	}
	fmt.Fprintf(w, "next: cd %s && go test ./...   (README.md says what comes after)\n", dir)
	return nil
}

// findSDK returns the absolute path of the hivelet checkout: flag if set,
// else the checkout containing the working directory, else the one
// containing this binary.
func findSDK(flag string) (string, error) {
	if flag != "" {
		abs, err := filepath.Abs(flag)
		if err != nil {
			return "", err
		}
		if !isSDKRoot(abs) {
			return "", fmt.Errorf("--sdk %s: no go.mod of module %s there", flag, sdkModule)
		}
		return abs, nil
	}
	var starts []string
	if wd, err := os.Getwd(); err == nil {
		starts = append(starts, wd)
	}
	if exe, err := os.Executable(); err == nil {
		if exe, err = filepath.EvalSymlinks(exe); err == nil {
			starts = append(starts, filepath.Dir(exe))
		}
	}
	for _, d := range starts {
		for ; ; d = filepath.Dir(d) {
			if isSDKRoot(d) {
				return d, nil
			}
			if d == filepath.Dir(d) {
				break
			}
		}
	}
	return "", errors.New("cannot find a hivelet checkout for the SDK (" + sdkModule +
		" is not on a module proxy yet): pass --sdk /path/to/hivelet")
}

// isSDKRoot reports whether dir holds the go.mod of the hivelet module.
func isSDKRoot(dir string) bool {
	b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		return false
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if m, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "module "); ok {
			return strings.Trim(strings.TrimSpace(m), `"`) == sdkModule
		}
	}
	return false
}

// goDirective returns the go version a go.mod requires.
func goDirective(gomod string) (string, error) {
	b, err := os.ReadFile(gomod)
	if err != nil {
		return "", err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), "go "); ok {
			return strings.TrimSpace(v), nil
		}
	}
	return "", fmt.Errorf("%s has no go directive", gomod)
}
