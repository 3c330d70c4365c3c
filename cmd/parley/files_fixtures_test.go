package main

import (
	"bytes"
	"image"
	"image/color"
	"image/png"
	"testing"
)

// filesModels adds two offline models to a test server: echo, which
// answers with what it got ("[image photo.png, 123 bytes]"), and
// textonly, which takes no images.
const filesModels = "  - name: echo\n    provider: echo\n  - name: textonly\n    provider: echo\n    inputs: [text]\n"

// testPNG is a small PNG image of one colour.
func testPNG(t *testing.T, c color.Color) []byte {
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
