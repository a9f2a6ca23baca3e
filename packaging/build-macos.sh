#!/usr/bin/env bash
# Builds Airlock.app and a DMG on a Mac (the app needs cgo and Apple's SDK,
# so this cannot run on Linux, except with --dry-run, which prints what it
# would do).
#
#   packaging/build-macos.sh [--dry-run]
#
# 1. airlock for darwin/arm64 and darwin/amd64 (cgo, macOS 14 minimum),
#    joined into one universal binary with lipo;
# 2. Airlock.app laid out by packaging/cmd/airlock-bundle: the binary, the
#    icon, Info.plist from Info.plist.tmpl, and the guest images in
#    Contents/Resources/images/<name>/<arch>/;
# 3. signed with packaging/airlock.entitlements: ad-hoc by default; with a
#    Developer ID, with the hardened runtime and a secure timestamp;
# 4. Airlock-<version>.dmg (hdiutil), notarized and stapled when notary
#    credentials are given.
#
# Environment:
#   AIRLOCK_IMAGES_HOME  an Airlock home whose images/ holds minimal/arm64 and
#                        minimal/amd64 (required). Images are built on Linux
#                        (`airlock image build --arch arm64 minimal`), e.g. by
#                        the CI job that precedes the Mac one.
#   AIRLOCK_IMAGES       images to ship (default minimal/arm64,minimal/amd64)
#   VERSION              default: git describe --always --dirty
#   OUT                  output folder (default dist)
#   CODESIGN_IDENTITY    default "-" (ad-hoc); e.g. "Developer ID Application: Name (TEAMID)"
#   NOTARY_PROFILE       a notarytool keychain profile (xcrun notarytool store-credentials), or
#   NOTARY_APPLE_ID, NOTARY_TEAM_ID, NOTARY_PASSWORD (an app-specific password)
set -euo pipefail
cd "$(dirname "$0")/.."

dry=
case "${1:-}" in
  --dry-run) dry=1 ;;
  "") ;;
  *) echo "usage: $0 [--dry-run]" >&2; exit 2 ;;
esac

VERSION="${VERSION:-$(git describe --always --dirty 2>/dev/null || echo dev)}"
OUT="${OUT:-dist}"
IDENTITY="${CODESIGN_IDENTITY:--}"
IMAGES="${AIRLOCK_IMAGES-minimal/arm64,minimal/amd64}"
APP="$OUT/Airlock.app"
DMG="$OUT/Airlock-$VERSION.dmg"
ENTITLEMENTS=packaging/airlock.entitlements

# run prints a command, and runs it unless this is a dry run.
run() {
  echo "+ $*"
  if [ -z "$dry" ]; then "$@"; fi
}
die() { echo "build-macos: $*" >&2; exit 1; }

notarize=
if [ -n "${NOTARY_PROFILE:-}" ]; then
  notarize=(--keychain-profile "$NOTARY_PROFILE")
elif [ -n "${NOTARY_APPLE_ID:-}" ]; then
  [ -n "${NOTARY_TEAM_ID:-}" ] && [ -n "${NOTARY_PASSWORD:-}" ] \
    || die "NOTARY_APPLE_ID needs NOTARY_TEAM_ID and NOTARY_PASSWORD too"
  notarize=(--apple-id "$NOTARY_APPLE_ID" --team-id "$NOTARY_TEAM_ID" --password "$NOTARY_PASSWORD")
fi
if [ -n "$notarize" ] && [ "$IDENTITY" = - ]; then
  die "notarization needs a Developer ID signature: set CODESIGN_IDENTITY"
fi

if [ -z "$dry" ]; then
  [ "$(uname -s)" = Darwin ] || die "Airlock.app is built on a Mac (cgo, Apple's SDK, codesign); try --dry-run"
  for tool in go clang lipo codesign hdiutil; do
    command -v "$tool" >/dev/null || die "$tool not found (install Go and the Xcode command line tools: xcode-select --install)"
  done
  [ -n "${AIRLOCK_IMAGES_HOME:-}" ] || [ -z "$IMAGES" ] \
    || die "set AIRLOCK_IMAGES_HOME to an Airlock home holding the guest images ($IMAGES), built on Linux with airlock image build"
fi

echo "== building Airlock $VERSION"
run mkdir -p "$OUT"
# cgo for vz; the binary runs on macOS 14 or later (LSMinimumSystemVersion).
for arch in arm64 amd64; do
  run env CGO_ENABLED=1 GOOS=darwin GOARCH="$arch" MACOSX_DEPLOYMENT_TARGET=14.0 \
    CGO_CFLAGS="-O2 -mmacosx-version-min=14.0" CGO_LDFLAGS="-mmacosx-version-min=14.0" \
    go build -trimpath \
    -ldflags "-X github.com/airlock-dev/airlock/app/cli.Version=$VERSION" \
    -o "$OUT/airlock-darwin-$arch" ./app
done
run lipo -create -output "$OUT/airlock" "$OUT/airlock-darwin-arm64" "$OUT/airlock-darwin-amd64"

echo "== assembling $APP"
run rm -rf "$APP"
bundle=(go run ./packaging/cmd/airlock-bundle -version "$VERSION" -binary "$OUT/airlock"
  -images "$IMAGES" -out "$OUT")
if [ -n "${AIRLOCK_IMAGES_HOME:-}" ]; then bundle+=(-images-home "$AIRLOCK_IMAGES_HOME"); fi
if [ -n "$dry" ]; then
  "${bundle[@]}" -dry-run
else
  "${bundle[@]}"
fi

echo "== signing ($([ "$IDENTITY" = - ] && echo ad-hoc || echo "$IDENTITY"))"
sign=(codesign --force --sign "$IDENTITY" --entitlements "$ENTITLEMENTS")
if [ "$IDENTITY" != - ]; then
  # Distribution: the hardened runtime and a secure timestamp, both required
  # for notarization. The virtualization entitlement needs no provisioning
  # profile.
  sign+=(--options runtime --timestamp)
fi
run "${sign[@]}" "$APP"
run codesign --verify --strict --verbose=2 "$APP"
if [ -z "$dry" ]; then
  codesign -d --entitlements - --xml "$APP" 2>/dev/null | grep -q com.apple.security.virtualization \
    || die "$APP was signed without com.apple.security.virtualization"
fi

echo "== making $DMG"
staging="$OUT/dmg"
run rm -rf "$staging" "$DMG"
run mkdir -p "$staging"
run cp -R "$APP" "$staging/"
run ln -s /Applications "$staging/Applications"
run hdiutil create -volname "Airlock" -srcfolder "$staging" -ov -format UDZO "$DMG"
run rm -rf "$staging"
if [ "$IDENTITY" != - ]; then
  run codesign --force --sign "$IDENTITY" --timestamp "$DMG"
fi

if [ -n "$notarize" ]; then
  echo "== notarizing"
  run xcrun notarytool submit "$DMG" "${notarize[@]}" --wait
  run xcrun stapler staple "$DMG"
  run xcrun stapler validate "$DMG"
else
  echo "== not notarized (set NOTARY_PROFILE, or NOTARY_APPLE_ID, NOTARY_TEAM_ID and NOTARY_PASSWORD, with a Developer ID CODESIGN_IDENTITY)"
fi
echo "== done: $APP, $DMG"
