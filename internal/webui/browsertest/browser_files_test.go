package browsertest

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image/color"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/parleyhq/parley/client"
	"github.com/parleyhq/parley/internal/testutil/imagetest"
)

// filesModels adds two offline models to the browser tests' server: echo,
// which answers with what it got ("[image photo.png, 123 bytes]"), and
// textonly, which takes no images.
const filesModels = "  - name: echo\n    provider: echo\n  - name: textonly\n    provider: echo\n    inputs: [text]\n"

// chooseFiles sets the files of the file input sel, as the file chooser
// does when a person picks them.
func (b *browser) chooseFiles(sel string, paths ...string) {
	b.t.Helper()
	b.do("choose "+strings.Join(paths, ", "), chromedp.SetUploadFiles(chromedp.CSS(sel), paths))
}

// pasteFile pastes a file into the element sel, as pasting a screenshot
// does: a paste event whose clipboard holds only the file.
func (b *browser) pasteFile(sel, name, mediaType string, data []byte) {
	b.t.Helper()
	expr := fmt.Sprintf(`(() => {
		const bytes = Uint8Array.from(atob(%s), (c) => c.charCodeAt(0));
		const dt = new DataTransfer();
		dt.items.add(new File([bytes], %s, {type: %s}));
		const el = document.querySelector(%s);
		el.focus();
		return el.dispatchEvent(new ClipboardEvent("paste", {clipboardData: dt, bubbles: true, cancelable: true}));
	})()`, jsString(base64.StdEncoding.EncodeToString(data)), jsString(name), jsString(mediaType), jsString(sel))
	if notTaken := eval[bool](b, expr); notTaken {
		b.fail("the paste of %s was not taken (its default action was not prevented)", name)
	}
}

// dropFile drops a file on the element sel, as dragging it from a file
// manager does.
func (b *browser) dropFile(sel, name, mediaType string, data []byte) {
	b.t.Helper()
	expr := fmt.Sprintf(`(() => {
		const bytes = Uint8Array.from(atob(%s), (c) => c.charCodeAt(0));
		const dt = new DataTransfer();
		dt.items.add(new File([bytes], %s, {type: %s}));
		const el = document.querySelector(%s);
		const over = el.dispatchEvent(new DragEvent("dragover", {dataTransfer: dt, bubbles: true, cancelable: true}));
		const drop = el.dispatchEvent(new DragEvent("drop", {dataTransfer: dt, bubbles: true, cancelable: true}));
		return !over && !drop;
	})()`, jsString(base64.StdEncoding.EncodeToString(data)), jsString(name), jsString(mediaType), jsString(sel))
	if taken := eval[bool](b, expr); !taken {
		b.fail("the drop of %s was not taken (its default action was not prevented)", name)
	}
}

// TestBrowserAttachFiles: a person attaches an image with the file
// chooser and pastes another; both show as chips with thumbnails, a file
// of a kind the server does not take is named in plain words, a file
// dropped on the conversation is attached and its chip's remove button
// takes it off again, and the message goes with both images, which the
// model gets and the conversation shows as thumbnails loaded with the
// token. A chat whose model takes no images refuses the message in words
// that name the file, and the text and the file stay. The New chat dialog
// attaches a pasted image to the first message.
func TestBrowserAttachFiles(t *testing.T) {
	t.Parallel()
	u := startUI(t, filesModels)
	b := newBrowser(t, desktop)
	dir := t.TempDir()
	photo := filepath.Join(dir, "photo.png")
	archive := filepath.Join(dir, "archive.zip")
	for path, data := range map[string][]byte{
		photo:   imagetest.PNG(t, color.RGBA{200, 40, 40, 255}),
		archive: []byte("PK\x03\x04\x14\x00\x00\x00\x08\x00not really a zip but it starts like one"),
	} {
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	id := u.createChat(t, `{"title": "pictures", "model": "echo"}`)
	b.openChat(u, id)

	chip := `#attachments li.attachment`
	b.chooseFiles("#attach-input", photo)
	b.waitCount("the chosen image's chip is uploaded", chip+`[data-state="ready"][data-name="photo.png"] img.attachment-thumb[alt="photo.png"]`, 1)
	b.pasteFile("#composer-input", "pasted.png", "image/png", imagetest.PNG(t, color.RGBA{40, 40, 200, 255}))
	b.waitCount("the pasted image's chip is uploaded", chip+`[data-state="ready"][data-name="pasted.png"] img[alt="pasted.png"]`, 1)
	if v := eval[string](b, `document.querySelector("#composer-input").value`); v != "" {
		t.Errorf("the pasted image went into the text too: %q", v)
	}

	// A kind of file the server does not take, in words; the others stay.
	b.allow(`status of 415`)
	b.chooseFiles("#attach-input", archive)
	b.waitText("the refusal names the file and the kinds", "#composer-error",
		`t.includes("archive.zip: this kind of file can't be attached (images, PDF, text, Markdown, JSON, CSV can)")`)
	b.waitCount("the refused file has no chip", chip, 2)

	// A file dropped on the conversation, and removed again, is not sent.
	b.dropFile("#messages", "notes.txt", "text/plain", []byte("milk, eggs\n"))
	b.waitCount("the text file's chip is uploaded", chip+`[data-state="ready"][data-name="notes.txt"]`, 1)
	b.click(`button.attachment-remove[aria-label="Remove notes.txt"]`)
	b.waitCount("the removed file's chip is gone", chip, 2)
	b.screenshot("attached")

	b.typeInto("#composer-input", "What are these?\r")
	user := `#messages li.msg[data-role="user"]`
	b.waitCount("the message shows both images, loaded", user+` a.file-image[data-state="loaded"] img.file-thumb`, 2)
	b.waitJS("the thumbnails are decoded images with alt text",
		`[...document.querySelectorAll("#messages img.file-thumb")].every((i) => i.complete && i.naturalWidth === 24 && i.alt.endsWith(".png"))`,
		`JSON.stringify([...document.querySelectorAll("#messages img.file-thumb")].map((i) => [i.alt, i.naturalWidth, i.src.slice(0, 5)]))`)
	b.waitCount("the composer's chips are gone once sent", chip, 0)
	b.waitText("the model got both images", `#messages li.msg[data-role="assistant"] .msg-text`,
		`t.includes("[image photo.png,") && t.includes("[image pasted.png,") && !t.includes("notes.txt")`)
	b.screenshot("sent")
	if n := eval[int](b, `[...document.querySelectorAll("#messages img.file-thumb")].filter((i) => !i.src.startsWith("blob:")).length`); n != 0 {
		t.Errorf("%d thumbnails are not loaded from blob: URLs (a bare src would go without the token)", n)
	}

	// The history holds the message with its two file parts, as sent.
	code, body := get(t, u.URL+"/api/v1/chats/"+id+"/messages", u.Token)
	var page struct{ Messages []client.Message }
	if code != http.StatusOK || json.Unmarshal([]byte(body), &page) != nil || len(page.Messages) != 2 {
		t.Fatalf("the chat's messages: %d %s", code, body)
	}
	var files []string
	for _, p := range page.Messages[0].Parts {
		if p.Type == client.PartFile {
			files = append(files, p.Name+" "+p.MediaType)
		}
	}
	if got := strings.Join(files, ", "); got != "photo.png image/png, pasted.png image/png" || page.Messages[0].Text() != "What are these?" {
		t.Errorf("the user message has text %q and files %q, want the question with photo.png and pasted.png", page.Messages[0].Text(), got)
	}

	// A model that takes no images: the server's message, and nothing lost.
	b.allow(`status of 400 .*/messages`)
	other := u.createChat(t, `{"title": "text only", "model": "textonly"}`)
	b.navigate(u.chatURL(other))
	b.visible(fmt.Sprintf(`main#chat[data-chat-id="%s"]`, other))
	b.chooseFiles("#attach-input", photo)
	b.waitCount("the image's chip is uploaded", chip+`[data-state="ready"]`, 1)
	b.typeInto("#composer-input", "Describe it.")
	b.click("#send")
	b.waitText("the refusal names the file and the model", "#composer-error",
		`t.includes("photo.png can't be sent: the model textonly does not take images (it takes text).")`)
	if v := eval[string](b, `document.querySelector("#composer-input").value`); v != "Describe it." {
		t.Errorf("the composer holds %q after the refusal, want the text kept", v)
	}
	if n := b.count(chip + `[data-state="ready"][data-name="photo.png"]`); n != 1 {
		t.Errorf("%d chips of photo.png after the refusal, want it kept", n)
	}
	if n := b.count(user); n != 0 {
		t.Errorf("%d user messages shown in the refused chat", n)
	}
	b.screenshot("refused")

	// The New chat dialog: an image pasted into the first message.
	b.click("#new-chat")
	b.visible("#new-chat-dialog[open]")
	b.waitCount("the dialog lists the models", `#new-model option[value="echo"]`, 1)
	b.do("choose the echo model", chromedp.SetValue(chromedp.CSS("#new-model"), "echo"))
	b.replaceValue("#new-message", "And this one?")
	b.pasteFile("#new-message", "green.png", "image/png", imagetest.PNG(t, color.RGBA{40, 160, 40, 255}))
	b.waitCount("the pasted image's chip in the dialog is uploaded", `#new-attachments li.attachment[data-state="ready"][data-name="green.png"]`, 1)
	b.click("#new-create")
	b.waitText("the new chat's answer names the image", `#messages li.msg[data-role="assistant"] .msg-text`, `t.includes("[image green.png,")`)
	b.waitCount("the new chat's message shows the image", user+` a.file-image[data-state="loaded"] img[alt="green.png"]`, 1)
}
