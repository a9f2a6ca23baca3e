// Package desktop opens Airlock's desktop app on fyne's real driver (GL
// and a display). It is the one place that calls app.New, kept apart so
// that app/gui's windows are tested headless with fyne's test driver.
//
// It must not import app/cli or a hypervisor package; main passes it to
// app/cli as the `gui` command's implementation.
package desktop

import (
	"context"
	"log/slog"
	"os"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/app"

	"github.com/airlock-dev/airlock/app/gui"
)

// AppID identifies Airlock to the desktop (preferences, notifications).
const AppID = "dev.airlock.Airlock"

// The main window's clock ticks every second (elapsed times, progress).
// It follows the sandbox store through file-system notifications; without
// them it re-reads the list every reloadEvery ticks, so that runs started
// by the CLI appear and progress without a click. With them it re-reads
// it every liveEvery ticks while a sandbox is live, to notice a run whose
// process was killed (its released lock is no file-system event).
const (
	reloadEvery = 3
	liveEvery   = 30
)

// storeDirer is a service over a sandbox store directory, which the main
// window can follow.
type storeDirer interface{ StoreDir() string }

// homer is a service over an Airlock home, where the main window keeps
// its choices and the demo's projects.
type homer interface{ Home() string }

// Run opens the main window over svc, then what open asks for, and
// returns when the app quits (or ctx ends).
func Run(ctx context.Context, svc gui.AppService, presets []gui.Preset, open gui.Startup) error {
	a := app.NewWithID(AppID)
	a.Settings().SetTheme(gui.Theme())
	w := gui.NewMainWindow(a, svc, presets)
	w.Window.SetMaster()
	if h, ok := svc.(homer); ok {
		w.UseHome(h.Home())
	}
	a.Lifecycle().SetOnStarted(func() { w.Open(open) })
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	following := false
	if d, ok := svc.(storeDirer); ok {
		stop, err := w.Follow(ctx, d.StoreDir())
		if err != nil {
			log := slog.New(slog.NewTextHandler(os.Stderr, nil))
			log.Warn("the sandbox list is re-read every few seconds instead of followed", "err", err)
		} else {
			defer stop()
			following = true
		}
	}
	// ran is closed once the app has quit on its own, before ctx is
	// cancelled by the return: the driver is gone then, and must not be
	// asked to quit again (GLFW panics).
	ran := make(chan struct{})
	go func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for n := 1; ; n++ {
			select {
			case <-ran:
				return
			case <-ctx.Done():
				select {
				case <-ran:
				default:
					fyne.Do(a.Quit)
				}
				return
			case <-t.C:
				fyne.Do(func() {
					reload := n%reloadEvery == 0
					if following {
						reload = n%liveEvery == 0 && w.Live()
					}
					w.Tick(reload)
				})
			}
		}
	}()
	w.Window.ShowAndRun()
	close(ran)
	return nil
}
