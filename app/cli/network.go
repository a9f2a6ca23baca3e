package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/airlock-dev/airlock/app/config"
	"github.com/airlock-dev/airlock/app/egress"
	"github.com/airlock-dev/airlock/app/envspec"
	"github.com/airlock-dev/airlock/app/home"
	"github.com/airlock-dev/airlock/app/images"
	"github.com/airlock-dev/airlock/app/pipeline"
	"github.com/airlock-dev/airlock/internal/safetext"
)

// netFlags are the network flags of run and exec.
type netFlags struct {
	allow []string
	// preset and presetSecrets are an agent preset's hosts and API keys
	// (run --agent).
	preset        []egress.Rule
	presetSecrets []config.SecretRule
}

func (f *netFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringArrayVar(&f.allow, "allow", nil, "let the guest reach HOST[:PORT] through Airlock's proxy (repeatable; *.example.com for subdomains, HOST:* for any port; default ports 443 for HTTPS, 80 for HTTP; \"HOST (GET,HEAD)\" for those methods only; a package registry read-only: "+egress.RegistryNames()+")")
}

// userConfig loads the user's config.toml.
func userConfig() (config.User, string, error) {
	path, err := config.UserPath(os.Getenv)
	if err != nil {
		return config.User{}, "", err
	}
	u, err := config.LoadUser(path)
	return u, path, err
}

// egressDetail renders an audited request (an egress.Record read back).
func egressDetail(m map[string]any) string {
	b, err := json.Marshal(m)
	if err != nil {
		return ""
	}
	var r egress.Record
	if err := json.Unmarshal(b, &r); err != nil {
		return ""
	}
	return r.String()
}

func newAllowCmd(e *env) *cobra.Command {
	var deny []string
	cmd := &cobra.Command{
		Use:   "allow ID HOST[:PORT]|@REGISTRY...",
		Short: "Let a running sandbox reach more hosts now (or --deny some), without restarting it",
		Long: `allow changes the network policy of a sandbox whose command is running:
the airlock run that runs it takes the change on its control socket
(sandboxes/<id>/egress.sock) and applies it to the next request. The change
lasts for this run only and is kept in the audit log. To allow a host for
every run, add it to [network] allow in ~/.config/airlock/config.toml.

@npm, @pypi, @go, @crates, @rubygems, @maven and @debian stand for a package
registry's hosts, GET and HEAD only ("@npm (GET,HEAD,PUT)" for more). A rule
with methods reaches its host over HTTPS only if the run started with the
sandbox CA (it had a secret or a rule with methods); otherwise over plain
HTTP only.`,
		Example: `  airlock allow 3f2a pypi.org files.pythonhosted.org
  airlock allow 3f2a @pypi
  airlock allow 3f2a --deny gist.github.com`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			sb, err := e.openSandbox(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			pol, err := pipeline.ChangePolicy(cmd.Context(), sb, pipeline.PolicyChange{Allow: args[1:], Deny: deny})
			if err != nil {
				return err
			}
			if e.json {
				return e.printJSON(pol)
			}
			fmt.Fprintf(e.stdout, "Sandbox %s now allows: %v\n", sb.ID, pol["allow"])
			if d, _ := pol["deny"].([]any); len(d) > 0 {
				fmt.Fprintf(e.stdout, "and denies: %v\n", d)
			}
			return nil
		},
	}
	cmd.Flags().StringArrayVar(&deny, "deny", nil, "deny HOST[:PORT] from now on (repeatable)")
	return cmd
}

func newTrustCmd(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "trust DIR",
		Short: "Confirm what a project's airlock.toml asks for (hosts, secrets) beyond your own configuration, and its environment's setup",
		Long: `trust shows what DIR/airlock.toml asks for beyond what your configuration
(~/.config/airlock/config.toml) allows, and records your confirmation of that
exact file by its SHA-256 in Airlock's home (trust.json). airlock run honours
a project's widening entries only for a confirmed file; changing the file
needs a new confirmation. Deny entries always apply and need none.

When the project describes an environment (airlock env: an image to pull,
packages, setup commands, hosts), trust confirms that exact environment too,
hosts included: nothing is pulled or run for it before, and its setup runs in
a builder VM, through the egress proxy.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runTrust(e, args[0])
		},
	}
}

// trusted is what airlock trust confirmed: the project's airlock.toml
// (its hash and what it widens) and the environment whose setup it lets
// build (nil for none).
type trusted struct {
	project, sha256 string
	widens          []string
	env             *envspec.Environment
}

// runTrust confirms what the project in dir asks for beyond the user's
// configuration, and its environment's setup.
func runTrust(e *env, dir string) error {
	h, err := e.home()
	if err != nil {
		return err
	}
	t := trusted{}
	if t.project, err = filepath.Abs(dir); err != nil {
		return err
	}
	proj, err := config.Load(t.project)
	if err != nil {
		return err
	}
	if t.env, err = envspec.Find(t.project); err != nil {
		return err
	}
	if t.env != nil && !t.env.AsksConfirmation() {
		t.env = nil
	}
	if proj.SHA256 == "" && t.env == nil {
		return fmt.Errorf("%s has no %s and no environment to build: nothing to trust", t.project, config.FileName)
	}
	user, _, err := userConfig()
	if err != nil {
		return err
	}
	trust := config.Trust{Path: home.Layout{Root: h}.TrustFile()}
	t.sha256 = proj.SHA256
	if proj.SHA256 != "" {
		t.widens = config.Widening(user.Network, proj.Network, nil)
		if err := trust.Confirm(t.project, proj.SHA256); err != nil {
			return err
		}
	}
	if t.env != nil {
		if err := trust.Confirm(images.TrustKey(t.project), t.env.ConfirmKey()); err != nil {
			return err
		}
	}
	if e.json {
		out := map[string]any{"project": t.project, "sha256": t.sha256, "widens": append([]string{}, t.widens...)}
		if spec := t.env; spec != nil {
			out["environment"] = map[string]any{"source": spec.Source, "key": spec.ConfirmKey(), "image": spec.Image, "apt": spec.Apt, "setup": len(spec.Setup), "hosts": spec.Hosts,
				"start": len(spec.Start), "add_hosts": len(spec.AddHosts)}
		}
		return e.printJSON(out)
	}
	printTrusted(e.stdout, t)
	return nil
}

// printTrusted says what was confirmed, for people.
func printTrusted(w io.Writer, t trusted) {
	if t.sha256 != "" {
		fmt.Fprintf(w, "Trusted %s (SHA-256 %s).\n", filepath.Join(t.project, config.FileName), t.sha256)
		if len(t.widens) == 0 {
			fmt.Fprintln(w, "It asks for nothing beyond your own configuration.")
		}
		for _, a := range t.widens {
			fmt.Fprintf(w, "  %s\n", a)
		}
	}
	if spec := t.env; spec != nil {
		fmt.Fprintf(w, "Trusted the environment of %s: ", spec.Source)
		if spec.Image != "" {
			fmt.Fprintf(w, "image %s, ", safetext.Line(spec.Image))
		}
		fmt.Fprintf(w, "%d Debian packages, %d setup commands, built in a VM through the egress proxy", len(spec.Apt), len(spec.Setup))
		if len(spec.Start) > 0 || len(spec.AddHosts) > 0 {
			fmt.Fprintf(w, "; %d start commands and %d /etc/hosts entries in every sandbox", len(spec.Start), len(spec.AddHosts))
		}
		if len(spec.Hosts) > 0 {
			fmt.Fprintf(w, " (hosts: %s)", strings.Join(spec.Hosts, ", "))
		}
		fmt.Fprintln(w, ".")
	}
}
