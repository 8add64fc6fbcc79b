#!/bin/sh
# assets-sample/tools/make-sources.sh — regenerate the sample project's
# source assets (the committed PNGs and WAVs) with ImageMagick and sox.
# The shaders, the level and kiln.yaml are written by hand.
#
# Usage: assets-sample/tools/make-sources.sh   (from anywhere)
# Needs: imagemagick (convert), sox. The outputs are deterministic: no
# timestamps or other metadata in the PNGs (so regenerating them changes
# nothing unless this script changed), fixed sample rates in the WAVs.
set -eu
cd "$(dirname "$0")/.."

# png OUT SIZE DRAW...: a SIZE canvas (WxH), transparent, drawn on with
# convert's -draw primitives, written without metadata chunks.
png() {
	out=$1 size=$2
	shift 2
	mkdir -p "$(dirname "$out")"
	convert -size "$size" xc:none "$@" -strip \
		-define png:exclude-chunks=date,time -define png:color-type=6 "$out"
}

# Game sprites: 256x256, halved for pc and quartered for mobile.
png art/sprites/hero.png 256x256 \
	-fill '#3a6ea5' -draw 'roundrectangle 72,96 184,232 24,24' \
	-fill '#f2c9a0' -draw 'circle 128,72 128,28' \
	-fill '#222222' -draw 'circle 112,66 112,58' -draw 'circle 144,66 144,58' \
	-fill '#7a4a20' -draw 'rectangle 80,232 112,252' -draw 'rectangle 144,232 176,252'
png art/sprites/coin.png 256x256 \
	-fill '#d4a017' -draw 'circle 128,128 128,16' \
	-fill '#f5d76e' -draw 'circle 128,128 128,40' \
	-fill '#d4a017' -draw 'rectangle 116,72 140,184'
png art/sprites/crate.png 256x256 \
	-fill '#8b5a2b' -draw 'rectangle 16,16 240,240' \
	-stroke '#5c3a1a' -strokewidth 14 -draw 'line 24,24 232,232' -draw 'line 232,24 24,232' \
	-fill none -draw 'rectangle 24,24 232,232'
png art/sprites/tree.png 256x256 \
	-fill '#6b4226' -draw 'rectangle 112,160 144,252' \
	-fill '#2e8b57' -draw 'polygon 128,8 236,176 20,176' \
	-fill '#3cb371' -draw 'polygon 128,40 204,150 52,150'

# UI sprites, of different sizes so the atlas packer has work to do.
png art/ui/button.png 192x64 \
	-fill '#4caf50' -draw 'roundrectangle 2,2 189,61 16,16' \
	-fill '#388e3c' -draw 'roundrectangle 8,40 183,58 10,10'
png art/ui/panel.png 160x160 \
	-fill '#263238cc' -draw 'roundrectangle 0,0 159,159 20,20' \
	-stroke '#90a4ae' -strokewidth 4 -fill none -draw 'roundrectangle 6,6 153,153 16,16'
png art/ui/heart.png 64x64 \
	-fill '#e53935' -draw 'circle 20,22 20,6' -draw 'circle 44,22 44,6' \
	-draw 'polygon 5,28 59,28 32,60'
png art/ui/star.png 64x64 \
	-fill '#fdd835' -draw 'polygon 32,2 40,24 62,24 44,38 51,61 32,47 13,61 20,38 2,24 24,24'
png art/ui/cursor.png 48x48 \
	-fill white -stroke black -strokewidth 2 -draw 'polygon 4,4 4,40 14,30 22,46 28,43 20,28 34,28'

# Sounds: 22.05 kHz mono 16-bit, short.
mkdir -p audio
sox -R -D -n -r 22050 -c 1 -b 16 audio/jump.wav synth 0.25 sine 300-900 fade 0 0.25 0.1
sox -R -D -n -r 22050 -c 1 -b 16 audio/coin.wav synth 0.12 square 988 : synth 0.3 square 1319 fade 0 0.3 0.2
sox -R -D -n -r 22050 -c 1 -b 16 audio/ambience.wav synth 2.0 brownnoise vol 0.3 fade 0.3 2.0 0.5
