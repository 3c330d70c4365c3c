package chat

import (
	"fmt"
	"mime"
	"strings"
)

// What a file part holds, by its media type (FileKindOf). A model entry's
// inputs name these kinds, and each provider sends each kind its own way.
const (
	FileImage = "image" // PNG, JPEG, GIF or WebP
	FilePDF   = "pdf"   // a PDF document
	FileText  = "text"  // plain text, Markdown, JSON or CSV: inlined as text
)

// FileKindOf is the kind of a file of mediaType (its parameters, such as
// "; charset=utf-8", ignored): FileImage, FilePDF, FileText, or "" for a
// type no provider takes.
func FileKindOf(mediaType string) string {
	mt, _, err := mime.ParseMediaType(mediaType)
	if err != nil {
		mt = strings.ToLower(strings.TrimSpace(mediaType))
	}
	switch mt {
	case "image/png", "image/jpeg", "image/gif", "image/webp":
		return FileImage
	case "application/pdf":
		return FilePDF
	case "text/plain", "text/markdown", "text/x-markdown", "application/json", "text/csv":
		return FileText
	}
	return ""
}

// FileLabel names a file part in words, without its content: "image
// photo.png", "PDF report.pdf", "file notes.md", or the URL of an image on
// the web. Compaction's transcript and the title prompt carry this in place
// of the file.
func FileLabel(p Part) string {
	name := p.Name
	if name == "" {
		switch {
		case p.URL != "" && !strings.HasPrefix(p.URL, "data:"):
			name = p.URL
		case p.FileID != "":
			name = p.FileID
		default:
			name = "(unnamed)"
		}
	}
	switch FileKindOf(p.MediaType) {
	case FileImage:
		return "image " + name
	case FilePDF:
		return "PDF " + name
	}
	if p.MediaType == "" && p.URL != "" {
		return "image " + name // an image_url part of the OpenAI facade
	}
	return "file " + name
}

// FileUnavailable is the text a model reads in place of a file that could
// not be loaded (deleted with its chat's owner, or its storage failed): the
// chat goes on without it.
func FileUnavailable(p Part) string {
	name := p.Name
	if name == "" {
		name = p.FileID
	}
	return fmt.Sprintf("[file %s is no longer available]", name)
}

// Token estimates of file parts (EstimateTokens). Providers count an image
// by its pixels (a large one is about 1,600 tokens on Anthropic, up to
// about 1,100 on OpenAI's high detail), and a PDF page as its text plus an
// image of the page, so a fixed figure per file, on the high side, is what
// parley can know before the provider reports. A text file's content is
// counted by its length when its bytes are at hand.
const (
	ImageTokens = 1600 // an image
	PDFTokens   = 6000 // a PDF: a few pages
	FileTokens  = 1000 // a text file whose bytes are not at hand
)

// estimateFile estimates the tokens of a file part.
func estimateFile(p Part) int64 {
	switch FileKindOf(p.MediaType) {
	case FilePDF:
		return PDFTokens
	case FileText:
		size := int64(len(p.Data))
		if size == 0 && strings.HasPrefix(p.URL, "data:") {
			size = int64(len(p.URL)) * 3 / 4 // base64 of the bytes
		}
		if size == 0 {
			return FileTokens
		}
		return EstimateText(p.Name) + (size+3)/4
	}
	return ImageTokens
}
