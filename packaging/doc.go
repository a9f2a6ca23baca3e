// Package packaging owns what turns an airlock binary into Airlock.app for
// macOS and is testable anywhere: the Info.plist rendered from the
// repository's Info.plist.tmpl, the bundle layout (binary, icon, guest images
// under Contents/Resources/images), copying that layout into place, the app
// icon (drawn in Go, written as PNG and as an .icns container), and a small
// reader of XML property lists for checks and tests.
//
// The steps that need a Mac (cgo builds, lipo, codesign, notarytool,
// hdiutil) live in packaging/build-macos.sh, which calls
// packaging/cmd/airlock-bundle for everything here.
//
// It must not import app, guest, sync, review, fyne or vz: it packages the
// program, it is not part of it. Of vm it uses only vm/image's layout of an
// image directory.
package packaging
