// Package desktop opens Airlock's desktop app on fyne's real driver (GL
// and a display). It is the one place that calls app.New, kept apart so
// that app/gui's windows are tested headless with fyne's test driver.
//
// It must not import app/cli or a hypervisor package; main passes it to
// app/cli as the `gui` command's implementation.
package desktop

import (
	"context"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/app"

	"github.com/airlock-dev/airlock/app/gui"
)

// AppID identifies Airlock to the desktop (preferences, notifications).
const AppID = "dev.airlock.Airlock"

// reloadEvery is how many one-second ticks pass between re-reading the
// sandbox list: runs started by the CLI or another window appear and
// progress without a click.
const reloadEvery = 3

// Run opens the main window over svc, then what open asks for, and
// returns when the app quits (or ctx ends).
func Run(ctx context.Context, svc gui.Service, presets []gui.Preset, open gui.Startup) error {
	a := app.NewWithID(AppID)
	w := gui.NewMainWindow(a, svc, presets)
	w.Window.SetMaster()
	a.Lifecycle().SetOnStarted(func() { w.Open(open) })
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for n := 1; ; n++ {
			select {
			case <-ctx.Done():
				fyne.Do(a.Quit)
				return
			case <-t.C:
				fyne.Do(func() { w.Tick(n%reloadEvery == 0) })
			}
		}
	}()
	w.Window.ShowAndRun()
	return nil
}
