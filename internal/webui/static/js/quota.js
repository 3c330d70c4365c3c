// Plain words for the server's quota refusals (429s), so a person reads
// what was reached, how much was used, and when it resets.

const units = {
  micros: (v) => (v / 1e6).toFixed(2),
  tokens: (v) => `${Number(v).toLocaleString()} tokens`,
};

const periods = { day: "daily", month: "monthly" };

function when(iso) {
  const d = new Date(iso);
  return Number.isNaN(d.getTime()) ? iso : d.toLocaleString();
}

// quotaMessage returns the plain text of a quota refusal (e is the error
// body's "error" object), or "" when e is not one.
export function quotaMessage(status, e) {
  if (status !== 429 || !e) return "";
  const d = e.details || {};
  switch (e.code) {
    case "spend_limit_exceeded": {
      const fmt = units[d.unit] || units.micros;
      const what = d.unit === "tokens" ? "token limit" : "spend limit";
      return `Your ${periods[d.period] || d.period} ${what} of ${fmt(d.limit)} is reached (${fmt(d.spent)} used). ` +
        `It resets ${when(d.resets_at)}; an admin can raise it sooner. Nothing was sent.`;
    }
    case "rate_limited":
      return `Too many requests: wait ${d.retry_after_seconds || 1} s and try again.`;
    case "too_many_streams":
      return `Too many open streams for this account (limit ${d.limit}): close a tab or another client.`;
    case "quota_exceeded":
      return `This account's ${String(d.quota || "").replace(/_/g, " ")} quota of ${d.limit} is reached.`;
  }
  return "";
}

// Error kinds a failed run can end with, as a person names them.
export const errorKinds = { spend_limit: "Budget reached" };
