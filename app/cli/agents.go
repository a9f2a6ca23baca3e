package cli

import (
	"maps"
	"slices"

	"errors"
	"fmt"
	"github.com/airlock-dev/airlock/app/agent/fakemodel"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/airlock-dev/airlock/app/agent"
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

// agentFlags are run's --agent, --prompt and --prompt-file.
type agentFlags struct {
	name       string
	prompt     string
	promptFile string
}

func (f *agentFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.name, "agent", "", "run an agent preset (airlock agents lists them) on --prompt instead of a command after --")
	fl.StringVar(&f.prompt, "prompt", "", "the task for --agent")
	fl.StringVar(&f.promptFile, "prompt-file", "", "read the task for --agent from FILE (- for standard input)")
}

// agentRun is what a preset adds to a run.
type agentRun struct {
	preset  agent.Preset
	command []string
}

// resolve checks the agent flags against the rest of the command line
// and builds the preset's command; nil without --agent.
func (f *agentFlags) resolve(e *env, args []string, dash int, script string) (*agentRun, error) {
	if f.name == "" {
		if f.prompt != "" || f.promptFile != "" {
			return nil, errors.New("--prompt and --prompt-file go with --agent NAME (airlock agents lists the agents)")
		}
		return nil, nil
	}
	if dash >= 0 || len(args) > 0 || script != "" {
		return nil, fmt.Errorf("--agent %s runs the agent's own command: give either --agent NAME --prompt TEXT, or a command after -- (or --script FILE), not both", f.name)
	}
	presets, err := loadAgents()
	if err != nil {
		return nil, err
	}
	p, ok := presets[f.name]
	if !ok {
		return nil, fmt.Errorf("no agent %q: known agents are %s (add your own in %s next to config.toml)", f.name, strings.Join(agent.Names(presets), ", "), agent.FileName)
	}
	prompt := f.prompt
	switch {
	case f.prompt != "" && f.promptFile != "":
		return nil, errors.New("give --prompt or --prompt-file, not both")
	case f.promptFile == "-":
		b, err := readCapped(e.stdin, maxPrompt)
		if err != nil {
			return nil, fmt.Errorf("read the prompt from standard input: %w", err)
		}
		prompt = string(b)
	case f.promptFile != "":
		fh, err := os.Open(f.promptFile)
		if err != nil {
			return nil, fmt.Errorf("read --prompt-file: %w", err)
		}
		b, err := readCapped(fh, maxPrompt)
		fh.Close()
		if err != nil {
			return nil, fmt.Errorf("read --prompt-file %s: %w", f.promptFile, err)
		}
		prompt = string(b)
	}
	if strings.TrimSpace(prompt) == "" {
		return nil, fmt.Errorf("--agent %s needs a task: --prompt TEXT or --prompt-file FILE", f.name)
	}
	if strings.ContainsRune(prompt, 0) {
		return nil, errors.New("the prompt contains a NUL byte, which cannot be passed as an argument")
	}
	return &agentRun{preset: p, command: p.Command(prompt, false)}, nil
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
the API key it needs (looked up on the host: macOS Keychain, [secrets] of
config.toml, or the environment; the VM sees only a placeholder).`,
		Example: `  airlock agents
  airlock agents --json
  airlock run --project . --agent claude --prompt "fix the failing test"`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			presets, err := loadAgents()
			if err != nil {
				return err
			}
			names := agent.Names(presets)
			if e.json {
				out := make([]agent.Preset, 0, len(names))
				for _, n := range names {
					out = append(out, presets[n])
				}
				return e.printJSON(out)
			}
			tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tCOMMAND\tHOSTS\tSECRET\tSOURCE")
			for _, n := range names {
				p := presets[n]
				var secrets []string
				for _, s := range p.Secret {
					secrets = append(secrets, s.Env)
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", n, strings.Join(p.CommandTemplate, " "), strings.Join(p.Hosts, ","), strings.Join(secrets, ","), p.Source)
			}
			return tw.Flush()
		},
	}
}

// demoAgent is the preset whose model is Airlock's own fake one.
const demoAgent = "demo"

// startFakeModel starts the demo agent's fake model on the host's
// loopback for this run, allows exactly its address through the proxy,
// and tells the agent where it is (AIRLOCK_DEMO_API).
func startFakeModel(e *env, ar *agentRun) (stop func(), err error) {
	srv, err := fakemodel.Start()
	if err != nil {
		return nil, err
	}
	ar.preset.Hosts = append(slices.Clone(ar.preset.Hosts), srv.Addr)
	env := maps.Clone(ar.preset.Env)
	if env == nil {
		env = map[string]string{}
	}
	env["AIRLOCK_DEMO_API"] = srv.URL
	ar.preset.Env = env
	e.note("demo agent: its fake model listens on %s (no API key needed)", srv.Addr)
	return func() { srv.Close() }, nil
}

// presetUser is the guest user an agent preset runs as; "" (the image's
// default user) without a preset or when the preset names none.
func presetUser(ar *agentRun) string {
	if ar == nil {
		return ""
	}
	return ar.preset.User
}
