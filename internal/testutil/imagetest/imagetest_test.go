package imagetest

import (
	"bytes"
	"image/color"
	"image/png"
	"testing"
)

// PNG decodes as a 24×16 image of the colour asked for.
func TestPNG(t *testing.T) {
	want := color.RGBA{200, 40, 40, 255}
	img, err := png.Decode(bytes.NewReader(PNG(t, want)))
	if err != nil {
		t.Fatal(err)
	}
	if b := img.Bounds(); b.Dx() != 24 || b.Dy() != 16 {
		t.Errorf("bounds %v, want 24×16", b)
	}
	for _, p := range [][2]int{{0, 0}, {23, 15}, {12, 8}} {
		if got := color.RGBAModel.Convert(img.At(p[0], p[1])); got != want {
			t.Errorf("pixel %v is %v, want %v", p, got, want)
		}
	}
}
