package sandbox

// StartStep is one command run in the sandbox before the command of
// each round: a project environment's postStartCommand or
// postAttachCommand. Shell is run by /bin/sh -c; else Argv without a
// shell.
type StartStep struct {
	// Origin is the key it came from ("postStartCommand"), Name its name
	// in the object form of the key (empty otherwise).
	Origin string   `json:"origin"`
	Name   string   `json:"name,omitempty"`
	Shell  string   `json:"shell,omitempty"`
	Argv   []string `json:"argv,omitempty"`
}

// Label is the step's key, with its name: "postStartCommand.db".
func (s StartStep) Label() string {
	if s.Name == "" {
		return s.Origin
	}
	return s.Origin + "." + s.Name
}

// HostEntry is one line written to the guest's /etc/hosts before the
// command (runArgs --add-host).
type HostEntry struct {
	Name string `json:"name"`
	IP   string `json:"ip"`
}
