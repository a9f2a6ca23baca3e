//go:build cgo

package main

import (
	"context"

	"github.com/airlock-dev/airlock/app/cli"
	"github.com/airlock-dev/airlock/app/gui"
	"github.com/airlock-dev/airlock/app/gui/desktop"
)

// guiOption gives the command line the desktop app, over the store and
// boot function the `gui` command sets up. fyne needs cgo (GL and the
// windowing system); a build without cgo has only the commands.
func guiOption() []cli.Option {
	return []cli.Option{cli.WithGUI(func(ctx context.Context, s cli.GUISetup) error {
		svc := &gui.StoreService{Store: s.Store, Planner: s.Planner}
		st := gui.Startup{Project: s.Project, Start: s.Start, Review: s.Review, File: s.File}
		if s.AgentsErr != nil {
			st.Notice = s.AgentsErr.Error() + " (the built-in agents are offered)"
		}
		return desktop.Run(ctx, svc, gui.Presets(s.DemoScript, s.Agents, s.Planner.Credentials), st)
	})}
}
