// ScrollFollower keeps a conversation's newest content in view while the
// reader is at (or near) the bottom of it: new messages, streamed text and
// the action panel scroll it along. Once they scroll up to read, the view
// stays where they left it and a "New messages ↓" button offers the way
// back; it goes when they reach the bottom again, by it or by scrolling.
// The scrolling box's data-following says which of the two it does. Only
// content that arrived (see arrived) shows the button: a reader unfolding
// a long result is not told of new messages.

import { h } from "./dom.js";

// near is how close to the bottom, in pixels, still counts as at it: a
// line or two, so a reader who drifted a little is still followed.
const near = 80;

export class ScrollFollower {
  // scroller is the scrolling box; watched are the elements inside it
  // whose size changes when content arrives; the button goes after
  // anchor, outside the scrolling box.
  constructor(scroller, watched, anchor) {
    this.scroller = scroller;
    this.stick = true;
    this.lastTop = 0;
    this.fresh = false; // content arrived since the reader left the end
    this.jump = h("button", { type: "button", id: "jump-bottom", class: "jump-bottom", hidden: true,
      onclick: () => this.toBottom() }, "New messages ↓");
    anchor.after(h("div", { class: "jump-row" }, this.jump));
    scroller.addEventListener("scroll", () => {
      // Only a move up lets go: content that grew between a scroll to
      // the bottom and its event must not read as the reader leaving.
      const top = scroller.scrollTop;
      const up = top < this.lastTop - 1;
      this.lastTop = top;
      if (up) this.stick = this.distance() <= near;
      else if (this.distance() <= near) this.stick = true;
      if (this.stick) {
        this.jump.hidden = true;
        this.fresh = false;
      }
      scroller.dataset.following = String(this.stick);
    });
    // A change of size is new (or grown, or removed) content: follow it,
    // or tell the reader there is more below.
    const grown = new ResizeObserver(() => this.changed());
    for (const el of watched) grown.observe(el);
  }

  // distance is how far, in pixels, the bottom of the content is below
  // the bottom of the view.
  distance() {
    const s = this.scroller;
    return s.scrollHeight - s.scrollTop - s.clientHeight;
  }

  // arrived says that content came from the conversation (a message, a
  // delta, an action), not from the reader opening something.
  arrived() {
    this.fresh = true;
  }

  changed() {
    if (this.stick) {
      this.bottom();
      return;
    }
    if (this.fresh && this.distance() > near) this.jump.hidden = false;
  }

  // toBottom scrolls to the newest content and follows it again.
  toBottom() {
    this.stick = true;
    this.scroller.dataset.following = "true";
    this.jump.hidden = true;
    this.fresh = false;
    this.bottom();
  }

  bottom() {
    this.scroller.scrollTop = this.scroller.scrollHeight;
    this.lastTop = this.scroller.scrollTop;
  }

  // reset follows from the bottom, as when another chat opens.
  reset() {
    this.toBottom();
  }
}
