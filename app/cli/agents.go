package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/airlock-dev/airlock/app/agent"
	"github.com/airlock-dev/airlock/app/plan"
	"github.com/airlock-dev/airlock/internal/lockio"
)

// loadAgents loads the agent presets: the built-ins and the user's
// agents.toml.
func loadAgents() (map[string]agent.Preset, error) {
	dir, err := agent.UserDir(os.Getenv)
	if err != nil {
		return nil, err
	}
	return agent.Load(dir)
}

// agentFlags are run's --agent (repeatable), --prompt and --prompt-file.
type agentFlags struct {
	names      []string
	prompt     string
	promptFile string
}

func (f *agentFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringSliceVar(&f.names, "agent", nil, "run an agent preset (airlock agents lists them) on --prompt instead of a command after --; several (--agent claude --agent codex, or claude,codex) run side by side from one snapshot")
	fl.StringVar(&f.prompt, "prompt", "", "the task for --agent")
	fl.StringVar(&f.promptFile, "prompt-file", "", "read the task for --agent from FILE (- for standard input)")
}

// resolve checks the agent flags against the rest of the command line
// and reads the prompt: the agents to run and their task (none without
// --agent).
func (f *agentFlags) resolve(e *env, args []string, dash int, script string) (names []string, prompt string, err error) {
	if len(f.names) == 0 {
		if f.prompt != "" || f.promptFile != "" {
			return nil, "", errors.New("--prompt and --prompt-file go with --agent NAME (airlock agents lists the agents)")
		}
		return nil, "", nil
	}
	shown := strings.Join(f.names, ",")
	if dash >= 0 || len(args) > 0 || script != "" {
		return nil, "", fmt.Errorf("--agent %s runs the agent's own command: give either --agent NAME --prompt TEXT, or a command after -- (or --script FILE), not both", shown)
	}
	for i, name := range f.names {
		if slices.Contains(f.names[:i], name) {
			return nil, "", fmt.Errorf("--agent %s is given twice: for several attempts of one agent use --fan-out N", name)
		}
	}
	prompt = f.prompt
	switch {
	case f.prompt != "" && f.promptFile != "":
		return nil, "", errors.New("give --prompt or --prompt-file, not both")
	case f.promptFile == "-":
		b, err := readCapped(e.stdin, maxPrompt)
		if err != nil {
			return nil, "", fmt.Errorf("read the prompt from standard input: %w", err)
		}
		prompt = string(b)
	case f.promptFile != "":
		fh, err := os.Open(f.promptFile)
		if err != nil {
			return nil, "", fmt.Errorf("read --prompt-file: %w", err)
		}
		b, err := readCapped(fh, maxPrompt)
		fh.Close()
		if err != nil {
			return nil, "", fmt.Errorf("read --prompt-file %s: %w", f.promptFile, err)
		}
		prompt = string(b)
	}
	if strings.TrimSpace(prompt) == "" {
		return nil, "", fmt.Errorf("--agent %s needs a task: --prompt TEXT or --prompt-file FILE", shown)
	}
	if strings.ContainsRune(prompt, 0) {
		return nil, "", errors.New("the prompt contains a NUL byte, which cannot be passed as an argument")
	}
	return f.names, prompt, nil
}

// maxPrompt caps a prompt: it becomes one argument of the agent's command.
const maxPrompt = 1 << 20

func readCapped(r io.Reader, max int64) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("longer than %d bytes", max)
	}
	return b, nil
}

func newAgentsCmd(e *env) *cobra.Command {
	return &cobra.Command{
		Use:     "agents",
		Aliases: []string{"agent"},
		Short:   "List the agent presets airlock run --agent knows",
		Long: `agents lists the agent presets: Airlock's built-in ones (claude, codex,
gemini) and those of agents.toml in your configuration directory (next to
config.toml, ~/.config/airlock/agents.toml), whose tables override the keys
they set and add agents. Each preset says the command it runs (with
{prompt} for the task), the hosts it may reach through Airlock's proxy and
the CLI version it was checked against, and whether it can sign in here:
its credentials (an API key, or a subscription's token) are looked up on
the host (macOS Keychain, [secrets] of config.toml, or the environment;
the VM sees only a placeholder), and a run of an agent with none stops
before its VM boots, saying what to set.`,
		Example: `  airlock agents
  airlock agents --json
  airlock run --project . --agent claude --prompt "fix the failing test"`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			presets, err := loadAgents()
			if err != nil {
				return err
			}
			pl, err := e.openPlanner(lockio.NewWriter(io.Discard))
			if err != nil {
				return err
			}
			pl.Agents = func() (map[string]agent.Preset, error) { return presets, nil }
			names := agent.Names(presets)
			if e.json {
				type shown struct {
					agent.Preset
					Credentials plan.Credentials `json:"credentials"`
				}
				out := make([]shown, 0, len(names))
				for _, n := range names {
					c, err := pl.Credentials(n)
					if err != nil {
						return err
					}
					out = append(out, shown{presets[n], c})
				}
				return e.printJSON(out)
			}
			tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tCOMMAND\tHOSTS\tCLI\tSIGN-IN\tSOURCE")
			for _, n := range names {
				p := presets[n]
				cli := "-"
				if p.CLI.Package != "" {
					cli = p.CLI.Package + " " + p.CLI.Version
				}
				c, err := pl.Credentials(n)
				if err != nil {
					return err
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", n, strings.Join(p.CommandTemplate, " "), strings.Join(p.Hosts, ","), cli, c, p.Source)
			}
			return tw.Flush()
		},
	}
}
