// Package imagetest makes images for tests that send or upload one.
package imagetest

import (
	"bytes"
	"image"
	"image/color"
	"image/png"
	"testing"
)

// PNG returns a small PNG image (24×16 pixels) of one colour: images of
// different colours differ, so a test can tell which one arrived.
func PNG(t testing.TB, c color.Color) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, 24, 16))
	for x := range 24 {
		for y := range 16 {
			img.Set(x, y, c)
		}
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}
