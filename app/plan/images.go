package plan

import (
	"github.com/airlock-dev/airlock/app/config"
	"github.com/airlock-dev/airlock/app/images"
	"github.com/airlock-dev/airlock/vm"
)

// Images is where the planner gets the images its runs boot (pulled, or
// built in builder VMs on its backend), made at its first use of the
// planner's home, image roots, architecture, agents repository and build
// output; its builders are sized by the user's limits and its notes are
// the planner's. There is one per planner, so the attempts of a fan-out
// fetch the agent image once.
func (pl *Planner) Images() *images.Source {
	pl.imagesOnce.Do(func() {
		pl.src = &images.Source{
			Home: pl.Home, ImageRoots: pl.ImageRoots, Arch: pl.Arch,
			AgentsRepo: pl.AgentsRepo, BuildOutput: pl.BuildOutput,
			BuildDial: pl.BuildDial, BuildRootCAs: pl.BuildRootCAs,
			Backend: func() (vm.Backend, error) {
				if pl.Backend == nil {
					return nil, ErrNoBackend
				}
				return pl.Backend(0)
			},
			Limits: func() (config.Limits, error) {
				eff, err := pl.Limits("", config.Limits{})
				return eff.Limits, err
			},
			Note: func(s string) { pl.note("%s", s) },
		}
	})
	return pl.src
}
