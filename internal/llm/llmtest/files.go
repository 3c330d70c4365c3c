package llmtest

import (
	"bytes"
	"image"
	"image/color"
	"image/png"
)

// PNG is a small valid PNG image (2×2 pixels), for tests that send an
// image.
var PNG = func() []byte {
	img := image.NewRGBA(image.Rect(0, 0, 2, 2))
	img.Set(0, 0, color.RGBA{R: 255, A: 255})
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		panic(err)
	}
	return b.Bytes()
}()

// PDF is a small valid one-page PDF document, for tests that send one.
var PDF = []byte("%PDF-1.4\n" +
	"1 0 obj <</Type /Catalog /Pages 2 0 R>> endobj\n" +
	"2 0 obj <</Type /Pages /Kids [3 0 R] /Count 1>> endobj\n" +
	"3 0 obj <</Type /Page /Parent 2 0 R /MediaBox [0 0 72 72]>> endobj\n" +
	"trailer <</Root 1 0 R>>\n%%EOF\n")
