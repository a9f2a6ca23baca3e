package plan

import (
	"github.com/airlock-dev/airlock/app/images"
	"github.com/airlock-dev/airlock/app/sandbox"
)

// services are the Compose services a run starts in the VM before its
// command: the environment's (Airlock's own Compose file, written from
// what envspec validated, and the images its build saved), else a
// reply's sandbox's, started again in the round's new VM; nil for none.
func services(env *images.Environment, reply *sandbox.Meta) (*sandbox.Services, error) {
	if env == nil || env.Compose == nil {
		if reply != nil {
			return reply.Services, nil
		}
		return nil, nil
	}
	if len(env.Compose.Services) == 0 {
		return nil, nil
	}
	file, err := images.ComposeFile(env.Compose, sandbox.Workspace)
	if err != nil {
		return nil, err
	}
	s := &sandbox.Services{File: file}
	for _, svc := range env.Compose.Services {
		s.Names = append(s.Names, svc.Name)
	}
	// Every service runs an image the environment's build pulled or
	// built, saved in its layer.
	s.Images = images.ComposeImages
	return s, nil
}
