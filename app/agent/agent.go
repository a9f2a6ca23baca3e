// Package agent holds Airlock's agent presets: how to run an AI coding
// agent's CLI in a sandbox (its command lines, environment, the hosts it
// needs, the secret it sends, where its explanation is). The built-in
// presets (claude, codex, gemini) are embedded from presets.toml; the
// user's agents.toml, next to config.toml, overrides their keys and adds
// agents.
//
// It is plain data: it must not import vm, guest, sync, review, fyne, or
// the app packages that run things (app/sandbox, app/machine/launch, app/cli).
package agent

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/BurntSushi/toml"

	"github.com/airlock-dev/airlock/app/config"
	"github.com/airlock-dev/airlock/app/egress"
	"github.com/airlock-dev/airlock/app/login"
)

// FileName is the user's presets file, in the user's configuration
// directory (the one holding config.toml).
const FileName = "agents.toml"

// Placeholder stands for the prompt in an argv template. An argument that
// holds it becomes one argument, whatever the prompt contains.
const Placeholder = "{prompt}"

//go:embed presets.toml
var builtin []byte

// Preset is how to run one agent.
type Preset struct {
	// Name is the table's name ("claude").
	Name string `toml:"-" json:"name"`
	// Description is a line for people.
	Description string `toml:"description" json:"description,omitempty"`
	// CommandTemplate is the argv of a non-interactive run (the key
	// "command"); {prompt} is the prompt wrapped in PromptTemplate.
	CommandTemplate []string `toml:"command" json:"command"`
	// Interactive is the argv of a run on a terminal; {prompt}, if any, is
	// the prompt as given (the argument is dropped when there is none).
	Interactive []string `toml:"interactive" json:"interactive"`
	// Continue is the argv that carries on the previous conversation with
	// a reply ({prompt}).
	Continue []string `toml:"continue" json:"continue,omitempty"`
	// Env is added to the command's environment.
	Env map[string]string `toml:"env" json:"env,omitempty"`
	// Hosts are allow patterns the agent needs: hosts and registry
	// presets such as "@npm" (egress.ParseRules).
	Hosts []string `toml:"hosts" json:"hosts"`
	// Secret lists the credentials the agent signs in with: the guest
	// sees a placeholder in Env; the proxy puts the value in Header to
	// Host. They are alternatives (an API key, a subscription's token):
	// those found on the host are sent, and a run finding none stops
	// before its VM boots.
	Secret []Secret `toml:"secret" json:"secret,omitempty"`
	// Login names a subscription sign-in the CLI keeps on the host
	// (app/login: "chatgpt", "google"), used when none of Secret is
	// found; empty for none.
	Login string `toml:"login" json:"login,omitempty"`
	// CLI is the agent CLI's package and the version the preset's flags
	// were checked against (the images pin the same version).
	CLI CLI `toml:"cli" json:"cli,omitzero"`
	// Rationale says where the agent's explanation of its work is.
	Rationale Rationale `toml:"rationale" json:"rationale"`
	// PromptTemplate wraps the user's prompt ({prompt}) in a
	// non-interactive run; empty means the prompt as given.
	PromptTemplate string `toml:"prompt_template" json:"prompt_template,omitempty"`
	// User is the guest account the agent runs as.
	User string `toml:"user" json:"user,omitempty"`
	// Image is the guest image the agent's CLI is on ("full"); a run
	// without --image uses it. Empty: the run's image (minimal by default).
	Image string `toml:"image" json:"image,omitempty"`
	// Source is "builtin" or the path of the file that last set a key.
	Source string `toml:"-" json:"source"`
}

// Secret is one way an agent signs in.
type Secret struct {
	config.SecretRule
	// How says, for people, what the credential is and how to get it
	// ("a subscription's token: run `claude setup-token`").
	How string `toml:"how" json:"how,omitempty"`
}

// CLI is an agent CLI as published.
type CLI struct {
	// Package is its npm package ("@anthropic-ai/claude-code").
	Package string `toml:"package" json:"package,omitempty"`
	// Version is the version its preset was checked against.
	Version string `toml:"version" json:"version,omitempty"`
}

// Rationale says how to read an agent's final message.
type Rationale struct {
	// JSONField is a dotted path to the final message in the JSON the
	// non-interactive command prints on stdout ("result").
	JSONField string `toml:"json_field" json:"json_field,omitempty"`
	// JSONLines says stdout is JSON Lines, one event a line (codex exec
	// --json): the final message is JSONField of the last line that has
	// it as a string and matches JSONMatch.
	JSONLines bool `toml:"json_lines" json:"json_lines,omitempty"`
	// JSONMatch picks the JSON values that can hold the final message:
	// each dotted path must hold the string given ({"item.type" =
	// "agent_message"}).
	JSONMatch map[string]string `toml:"json_match" json:"json_match,omitempty"`
	// SummaryFile is a file, relative to the workspace, the agent is asked
	// to write (".airlock/summary.md").
	SummaryFile string `toml:"summary_file" json:"summary_file,omitempty"`
}

// keys are the keys a preset table may hold, for error messages.
const keys = "description, command, interactive, continue, env, hosts, [[NAME.secret]] (env, host, header, how), login, cli (package, version), rationale (json_field, json_lines, json_match, summary_file), prompt_template, user, image"

// UserDir is the user's configuration directory: where config.toml is
// (config.UserPath).
func UserDir(getenv func(string) string) (string, error) {
	p, err := config.UserPath(getenv)
	if err != nil {
		return "", err
	}
	return filepath.Dir(p), nil
}

// Load returns the built-in presets with userConfigDir/agents.toml laid
// over them (a missing file is no error). Every problem is reported at
// once, with the file's name.
func Load(userConfigDir string) (map[string]Preset, error) {
	presets, err := parse(builtin, "builtin", nil)
	if err != nil {
		return nil, fmt.Errorf("built-in presets: %w", err)
	}
	if userConfigDir == "" {
		return presets, nil
	}
	p := filepath.Join(userConfigDir, FileName)
	data, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return presets, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", p, err)
	}
	if presets, err = parse(data, p, presets); err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	return presets, nil
}

// parse decodes data strictly and lays it over base (not modified).
func parse(data []byte, source string, base map[string]Preset) (map[string]Preset, error) {
	var file map[string]Preset
	md, err := toml.NewDecoder(bytes.NewReader(data)).Decode(&file)
	if err != nil {
		return nil, err
	}
	var errs []error
	if undec := md.Undecoded(); len(undec) > 0 {
		ks := make([]string, len(undec))
		for i, k := range undec {
			ks[i] = k.String()
		}
		errs = append(errs, fmt.Errorf("unknown keys %s (a preset knows: %s)", strings.Join(ks, ", "), keys))
	}
	out := make(map[string]Preset, len(base)+len(file))
	for n, p := range base {
		out[n] = p
	}
	names := make([]string, 0, len(file))
	for n := range file {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		p, ok := out[n]
		if !ok {
			p = Preset{}
		}
		u := file[n]
		set := func(key ...string) bool { return md.IsDefined(append([]string{n}, key...)...) }
		if set("description") {
			p.Description = u.Description
		}
		if set("command") {
			p.CommandTemplate = u.CommandTemplate
		}
		if set("interactive") {
			p.Interactive = u.Interactive
		}
		if set("continue") {
			p.Continue = u.Continue
		}
		if set("env") {
			p.Env = u.Env
		}
		if set("hosts") {
			p.Hosts = u.Hosts
		}
		if set("secret") {
			p.Secret = u.Secret
		}
		if set("login") {
			p.Login = u.Login
		}
		if set("cli", "package") {
			p.CLI.Package = u.CLI.Package
		}
		if set("cli", "version") {
			p.CLI.Version = u.CLI.Version
		}
		if set("rationale", "json_field") {
			p.Rationale.JSONField = u.Rationale.JSONField
		}
		if set("rationale", "json_lines") {
			p.Rationale.JSONLines = u.Rationale.JSONLines
		}
		if set("rationale", "json_match") {
			p.Rationale.JSONMatch = u.Rationale.JSONMatch
		}
		if set("rationale", "summary_file") {
			p.Rationale.SummaryFile = u.Rationale.SummaryFile
		}
		if set("prompt_template") {
			p.PromptTemplate = u.PromptTemplate
		}
		if set("user") {
			p.User = u.User
		}
		if set("image") {
			p.Image = u.Image
		}
		p.Name, p.Source = n, source
		if err := p.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("agent %s: %w", n, err))
		}
		out[n] = p
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

var (
	nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]*$`)
	envRE  = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	userRE = regexp.MustCompile(`^[a-z_][a-z0-9_-]*$`)
)

// Validate reports every problem of the preset at once.
func (p Preset) Validate() error {
	var errs []error
	if !nameRE.MatchString(p.Name) {
		errs = append(errs, fmt.Errorf("name %q: want lower-case letters, digits, '.', '_' or '-'", p.Name))
	}
	if len(p.CommandTemplate) == 0 || p.CommandTemplate[0] == "" {
		errs = append(errs, errors.New("command: want an argv, such as [\"tool\", \"-p\", \"{prompt}\"]"))
	} else if !hasPlaceholder(p.CommandTemplate) {
		errs = append(errs, fmt.Errorf("command: no argument holds %s, so the prompt would be lost", Placeholder))
	}
	if len(p.Interactive) == 0 || p.Interactive[0] == "" {
		errs = append(errs, errors.New("interactive: want an argv, such as [\"tool\"]"))
	}
	if len(p.Continue) > 0 && (p.Continue[0] == "" || !hasPlaceholder(p.Continue)) {
		errs = append(errs, fmt.Errorf("continue: want an argv with %s for the reply", Placeholder))
	}
	for k := range p.Env {
		if !envRE.MatchString(k) {
			errs = append(errs, fmt.Errorf("env: %q is not a valid variable name", k))
		}
	}
	for _, h := range p.Hosts {
		if _, err := egress.ParseRules(h); err != nil {
			errs = append(errs, fmt.Errorf("hosts: %w", err))
		}
	}
	if err := (config.Network{Secret: p.Secrets()}).Validate(); err != nil {
		errs = append(errs, err)
	}
	for _, s := range p.Secret {
		if _, clash := p.Env[s.Env]; clash {
			errs = append(errs, fmt.Errorf("env %s is also a secret's name: the secret's placeholder goes there", s.Env))
		}
	}
	if f := p.Rationale.JSONField; f != "" && !dottedPath(f) {
		errs = append(errs, fmt.Errorf("rationale.json_field %q: want a dotted path such as \"result\"", f))
	}
	if p.Rationale.JSONField == "" && (p.Rationale.JSONLines || len(p.Rationale.JSONMatch) > 0) {
		errs = append(errs, errors.New("rationale.json_lines and json_match need json_field: the field that holds the final message"))
	}
	for _, f := range sortedKeys(p.Rationale.JSONMatch) {
		if !dottedPath(f) {
			errs = append(errs, fmt.Errorf("rationale.json_match %q: want a dotted path such as \"item.type\"", f))
		}
	}
	if f := p.Rationale.SummaryFile; f != "" {
		if path.IsAbs(f) || path.Clean(f) != f || f == "." || strings.HasPrefix(f, "../") || f == ".." {
			errs = append(errs, fmt.Errorf("rationale.summary_file %q: want a clean path relative to the workspace", f))
		}
	}
	if p.PromptTemplate != "" && !strings.Contains(p.PromptTemplate, Placeholder) {
		errs = append(errs, fmt.Errorf("prompt_template: no %s, so the prompt would be lost", Placeholder))
	}
	if p.Login != "" {
		if _, ok := login.Lookup(p.Login); !ok {
			errs = append(errs, fmt.Errorf("login %q: Airlock knows %s", p.Login, strings.Join(login.Names(), ", ")))
		}
	}
	if p.User != "" && !userRE.MatchString(p.User) {
		errs = append(errs, fmt.Errorf("user %q: not a valid account name", p.User))
	}
	if p.Image != "" && !nameRE.MatchString(p.Image) {
		errs = append(errs, fmt.Errorf("image %q: not an image name (airlock image ls lists them)", p.Image))
	}
	return errors.Join(errs...)
}

func dottedPath(f string) bool {
	return !slices.Contains(strings.Split(f, "."), "")
}

func sortedKeys(m map[string]string) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

func hasPlaceholder(argv []string) bool {
	for _, a := range argv {
		if strings.Contains(a, Placeholder) {
			return true
		}
	}
	return false
}

// Prompt is the prompt of a non-interactive run: prompt wrapped in
// PromptTemplate.
func (p Preset) Prompt(prompt string) string {
	if p.PromptTemplate == "" {
		return prompt
	}
	return strings.ReplaceAll(p.PromptTemplate, Placeholder, prompt)
}

// Command is the argv that runs the agent on prompt: Command with the
// wrapped prompt, or, when interactive, Interactive with the prompt as
// given (an argument that is only {prompt} is dropped when prompt is
// empty).
func (p Preset) Command(prompt string, interactive bool) []string {
	if interactive {
		return substitute(p.Interactive, prompt, true)
	}
	return substitute(p.CommandTemplate, p.Prompt(prompt), false)
}

// ContinueCommand is the argv that carries on the previous conversation
// with reply; nil when the preset cannot.
func (p Preset) ContinueCommand(reply string) []string {
	if len(p.Continue) == 0 {
		return nil
	}
	return substitute(p.Continue, reply, false)
}

func substitute(argv []string, prompt string, dropEmpty bool) []string {
	out := make([]string, 0, len(argv))
	for _, a := range argv {
		if a == Placeholder && prompt == "" && dropEmpty {
			continue
		}
		out = append(out, strings.ReplaceAll(a, Placeholder, prompt))
	}
	return out
}

// Rules returns the preset's allow rules (source "preset"), for
// config.PolicyInput.Preset.
func (p Preset) Rules() ([]egress.Rule, error) {
	var out []egress.Rule
	var errs []error
	for _, h := range p.Hosts {
		rs, err := egress.ParseRules(h)
		if err != nil {
			errs = append(errs, fmt.Errorf("agent %s: hosts: %w", p.Name, err))
			continue
		}
		for _, r := range rs {
			r.Source = "preset"
			out = append(out, r)
		}
	}
	return out, errors.Join(errs...)
}

// Secrets returns the preset's secrets as rules, for
// config.PolicyInput.PresetSecrets.
func (p Preset) Secrets() []config.SecretRule {
	out := make([]config.SecretRule, 0, len(p.Secret))
	for _, s := range p.Secret {
		out = append(out, s.SecretRule)
	}
	return out
}

// FinalMessage reads the agent's final message from what its
// non-interactive command printed: Rationale.JSONField of the JSON
// value, or with JSONLines of the last line that has it (lines that are
// not JSON are skipped), among the values that match JSONMatch. ok is
// false when the preset names no field or the output does not hold it
// as a string.
func (p Preset) FinalMessage(stdout []byte) (msg string, ok bool) {
	r := p.Rationale
	if r.JSONField == "" {
		return "", false
	}
	docs := [][]byte{stdout}
	if r.JSONLines {
		docs = bytes.Split(stdout, []byte("\n"))
	}
	for i := len(docs) - 1; i >= 0; i-- {
		var v any
		if err := json.Unmarshal(bytes.TrimSpace(docs[i]), &v); err != nil {
			continue
		}
		if !r.matches(v) {
			continue
		}
		if msg, ok := stringAt(v, r.JSONField); ok {
			return msg, true
		}
	}
	return "", false
}

// matches says whether v holds every value of JSONMatch.
func (r Rationale) matches(v any) bool {
	for path, want := range r.JSONMatch {
		if got, ok := stringAt(v, path); !ok || got != want {
			return false
		}
	}
	return true
}

// stringAt is the string at the dotted path in v.
func stringAt(v any, path string) (string, bool) {
	for part := range strings.SplitSeq(path, ".") {
		m, isMap := v.(map[string]any)
		if !isMap {
			return "", false
		}
		var found bool
		if v, found = m[part]; !found {
			return "", false
		}
	}
	s, ok := v.(string)
	return s, ok
}

// Names returns the presets' names, sorted.
func Names(presets map[string]Preset) []string {
	out := make([]string, 0, len(presets))
	for n := range presets {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}
