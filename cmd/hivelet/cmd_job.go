package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/hivelet/hivelet/host/jobspec"
	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/plugins/builtin"
)

// newJobCmd is the job command group: the local file commands (validate,
// inspect) live here; the commands that talk to a running fleet are added by
// addJobClusterCmds.
func newJobCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "job",
		Short: "Check, inspect and run job files",
	}
	// Every subcommand that reads a job file takes values for its variable
	// blocks (see loadJobFile).
	cmd.PersistentFlags().StringArray("var", nil, "set a job file variable: -var name=value (repeatable; wins over -var-file and the environment)")
	cmd.PersistentFlags().StringArray("var-file", nil, "read job file variables from an HCL (name = value) or .json file (repeatable, later files win)")
	cmd.AddCommand(newJobValidateCmd(), newJobInspectCmd())
	addJobClusterCmds(cmd)
	return cmd
}

func newJobValidateCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "validate FILE",
		Short: "Check a job file (.hcl, .nomad or .json) and report every problem",
		Long: "Parse and validate a job file. Prints one line and exits 0 when the file is valid;\n" +
			"otherwise prints each problem as file:line:col: message (HCL) or file: field: message (JSON)\n" +
			"and exits 2.",
		Args: oneFileArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			job, err := loadJobFile(cmd, args[0])
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: OK: %s job %q, %d group(s)\n", args[0], job.Type, job.ID, len(job.Groups))
			return nil
		},
	}
}

func newJobInspectCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "inspect FILE",
		Short: "Print a job file's canonical JSON (the form stored in the jobs bucket)",
		Long: "Parse and validate a job file and print the effective job (update blocks inherited\n" +
			"and defaulted) as canonical JSON: the same job always prints the same bytes.",
		Args: oneFileArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			job, err := loadJobFile(cmd, args[0])
			if err != nil {
				return err
			}
			out, err := jobspec.Canonical(job)
			if err != nil {
				return err
			}
			_, err = cmd.OutOrStdout().Write(out)
			return err
		},
	}
}

// loadJobFile reads and parses a job file, its variables given by the
// -var and -var-file flags and the HIVELET_VAR_* / NOMAD_VAR_* environment.
// Parse problems are printed one per line on stderr and returned as bad
// input (exit code 2); what the file says that hivelet ignores is printed
// there as "file:line:col: warning: ...", and changes no exit code.
func loadJobFile(cmd *cobra.Command, path string) (*model.Job, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, badInput(fmt.Errorf("reading job file: %w", err))
	}
	in, err := variableInputs(cmd)
	if err != nil {
		return nil, badInput(err)
	}
	in.Warn = func(w *jobspec.Error) {
		w.Message = "warning: " + w.Message
		fmt.Fprintln(cmd.ErrOrStderr(), w)
	}
	job, err := jobspec.ParseWith(path, data, in)
	if err != nil {
		var errs jobspec.Errors
		if errors.As(err, &errs) {
			for _, e := range errs {
				fmt.Fprintln(cmd.ErrOrStderr(), e)
			}
			return nil, badInput(fmt.Errorf("%s: %d problem(s) found", path, len(errs)))
		}
		return nil, badInput(err)
	}
	return job, nil
}

// variableInputs gathers the values of a job file's variables from the
// command's flags and the process environment, and the built-in drivers'
// schemas each task's config is checked against.
func variableInputs(cmd *cobra.Command) (jobspec.Inputs, error) {
	in := jobspec.Inputs{Env: os.Environ(), Drivers: builtin.Schemas(), ReadFile: os.ReadFile}
	if f := cmd.Flags().Lookup("var"); f != nil {
		in.Vars, _ = cmd.Flags().GetStringArray("var")
	}
	if f := cmd.Flags().Lookup("var-file"); f != nil {
		files, _ := cmd.Flags().GetStringArray("var-file")
		for _, name := range files {
			src, err := os.ReadFile(name)
			if err != nil {
				return in, fmt.Errorf("reading -var-file: %w", err)
			}
			in.Files = append(in.Files, jobspec.VarFile{Name: name, Src: src})
		}
	}
	return in, nil
}

// oneFileArg requires exactly one argument; a wrong count is bad input,
// with the usage line (usageErrors).
var oneFileArg = cobra.ExactArgs(1)
