package plan

import (
	"github.com/airlock-dev/airlock/app/envspec"
	"github.com/airlock-dev/airlock/app/sandbox"
)

// startSteps are an environment's start commands and /etc/hosts entries
// as a run carries them out (pipeline.RunSpec's Start and Hosts), and a
// reply round again (sandbox.Meta keeps them).
func startSteps(e *envspec.Environment) ([]sandbox.StartStep, []sandbox.HostEntry) {
	if e == nil {
		return nil, nil
	}
	var steps []sandbox.StartStep
	for _, s := range e.Start {
		steps = append(steps, sandbox.StartStep{Origin: s.Origin, Name: s.Name, Shell: s.Shell, Argv: s.Argv})
	}
	var hosts []sandbox.HostEntry
	for _, h := range e.AddHosts {
		hosts = append(hosts, sandbox.HostEntry{Name: h.Name, IP: h.IP})
	}
	return steps, hosts
}
