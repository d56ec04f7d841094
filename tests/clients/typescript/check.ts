// Compiled with `tsc --strict --noEmit` beside `api.d.ts`, the types openapi-typescript generates
// from the live schema (tests/clients/test_generated_typescript_types.py). Each check stops compiling
// when a type the document gives slips to `any` or `unknown`, or drifts from what the API sends.
import type { components, operations, paths } from "./api";

type Schemas = components["schemas"];
// True only when A and B are the same type: `any` is the same as nothing but `any`.
type Exactly<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false;
function holds<T extends true>(): T | undefined {
  return undefined;
}

// Every error body: a code and a human detail.
type ErrorBody = Schemas["ErrorOutput"];
holds<Exactly<ErrorBody, { error: string; detail: string }>>();
export function explain(failure: ErrorBody): string {
  return `${failure.error}: ${failure.detail}`;
}

// Creating an item takes JSON with a text title, and only JSON.
type ItemCreate = paths["/a/{slug}/items"]["post"]["requestBody"]["content"];
holds<Exactly<keyof ItemCreate, "application/json">>();
export const draft: ItemCreate["application/json"] = { title: "From TypeScript" };
// @ts-expect-error a title is text
export const wrongDraft: ItemCreate["application/json"] = { title: 42 };

// Exec: a shell string or an argv; the answer's exit code is a number.
holds<Exactly<Schemas["ExecInput"]["command"], string | string[]>>();
holds<Exactly<Schemas["ExecOutput"]["exit_code"], number>>();

// A chat message is text.
holds<Exactly<Schemas["ChatSendInput"]["content"], string>>();

// A file download is the raw bytes; the upload to the knowledge base is a multipart file.
type Download = operations["a_items_files_retrieve"]["responses"][200]["content"];
holds<Exactly<Download["application/octet-stream"], string>>();
type Upload = operations["kb_collections_documents_create"]["requestBody"]["content"];
holds<Exactly<keyof Upload, "multipart/form-data">>();
holds<Exactly<Upload["multipart/form-data"]["file"], string>>();

// Workflow filters: a multi-valued `__in` and a two-value range; count takes the list's filters.
type WorkflowFilters = NonNullable<operations["workflow_list"]["parameters"]["query"]>;
holds<Exactly<WorkflowFilters["name__in"], string[] | undefined>>();
// A side of a number range may be "" (open).
holds<Exactly<WorkflowFilters["every_seconds__range"], (number | string)[] | undefined>>();
type CountFilters = NonNullable<operations["workflow_count"]["parameters"]["query"]>;
holds<Exactly<Exclude<keyof WorkflowFilters, keyof CountFilters>, "page" | "page_size" | "sort_by" | "sort_order">>();

// The notifications poll: If-None-Match in, ETag and X-Poll-Interval out, and a 304 with no body.
type Poll = operations["notifications_retrieve"];
holds<Exactly<NonNullable<Poll["parameters"]["header"]>["If-None-Match"], string | undefined>>();
holds<Exactly<Poll["responses"][200]["headers"]["ETag"], string | undefined>>();
holds<Exactly<Poll["responses"][304]["headers"]["X-Poll-Interval"], number | undefined>>();
holds<Exactly<Poll["responses"][304]["content"], undefined>>();
type Inbox = Poll["responses"][200]["content"]["application/json"];
export function unread(inbox: Inbox): string[] {
  return inbox.results.filter((notification) => !notification.read).map((notification) => notification.title);
}

// A personal token is shown once, as text.
holds<Exactly<Schemas["ApiTokenIssuedOutput"]["token"], string>>();

// A 507 names its limit: a client narrows on `error`, then reads that refusal's own fields.
type QuotaRefusal = operations["a_items_exec_create"]["responses"][507]["content"]["application/json"];
export function limitReached(refusal: QuotaRefusal): string {
  if (refusal.error === "sandbox_quota_exceeded") {
    return `${refusal.dimension}: ${refusal.used} of ${refusal.limit}, ${refusal.requested} more asked`;
  }
  return `${refusal.attempted} bytes asked of ${refusal.quota}`;
}
holds<Exactly<Schemas["SandboxQuotaRefusal"]["dimension"], "sandboxes" | "cpu" | "memory">>();
holds<Exactly<Schemas["DiskQuotaRefusal"]["error"], "workspace_quota_exceeded" | "user_quota_exceeded">>();

// A 412 names the revision that is current; a 401 says its challenge; a 429 when to try again.
type Update = operations["workflow_update"]["responses"];
holds<Exactly<Update[412]["content"]["application/json"]["current_revision_id"], string>>();
type Exec = operations["a_items_exec_create"]["responses"];
holds<Exactly<Exec[401]["headers"]["WWW-Authenticate"], string | undefined>>();
holds<Exactly<Exec[429]["headers"]["Retry-After"], number | undefined>>();

// A nullable reference is the component or null, nothing looser.
type Disk = Schemas["ItemDetailOutput"]["disk"];
holds<Exactly<Exclude<Disk, null | undefined>, Schemas["ItemDiskOutput"]>>();
holds<null extends Disk ? true : false>();

// A stream is an answer of its own, asked for with `Accept: text/event-stream`: each event named,
// and refusals stay JSON (no `text/event-stream` body a client would have to handle for a 429).
holds<Exactly<Exec[200]["content"]["text/event-stream"]["event"], "started" | "output" | "result" | "error">>();
holds<Exactly<keyof Exec[429]["content"], "application/json">>();
type Turn = operations["a_items_messages_create"]["responses"];
holds<Exactly<Turn[200]["content"]["text/event-stream"]["event"], "delta" | "restart" | "tool" | "step" | "turn" | "error">>();
type Asked = operations["kb_chats_messages_create"]["responses"];
holds<Exactly<Asked[200]["content"]["text/event-stream"]["event"], "delta" | "restart" | "answer" | "error">>();
