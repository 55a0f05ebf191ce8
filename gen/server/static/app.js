/*
 * gen dashboard: the live page `gen serve` answers at "/".
 *
 * Plain ES2020, no framework, no build step, nothing fetched from outside the server.
 * This file, top to bottom:
 *   1. constants and state   everything the page knows lives in `state` (and state.run)
 *   2. helpers               DOM builder, number/time formatting, word count
 *   3. api and key           fetch with the API key, OpenAI-shaped errors, the key form
 *   4. header                model name, connection indicator (#conn)
 *   5. new run form          pipelines select, one field per input, POST /v1/runs
 *   6. runs list             GET /v1/runs every 2 s, keyed DOM update, #run=<id> selection
 *   7. selected run          manifest, header, cancel/resume, totals
 *   8. event stream          one EventSource per selected run, seq de-duplication, reconnects
 *   9. events                applyEvent(): section cards, live text, rounds, passages; batched rendering
 *   9b. citations            a run's citation figures, each section's passages and figures
 *  10. charts                timeline <img> (at most every 3 s), tokens/s sparkline (inline SVG)
 *  11. document              the rendered document (sanitised) and the download link
 *  12. boot                  wiring, timers, window.genDashboard test hooks
 *
 * Model text is only ever inserted as text (text nodes, textContent), never as HTML.
 * The rendered document comes from the server, which escapes raw HTML; it is parsed with
 * DOMParser (nothing runs there) and stripped of scripts, handlers and javascript: URLs.
 */
'use strict';

/* ---- 1. constants and state ---------------------------------------------------------- */

const POLL_MS = 2000;
const TIMELINE_MIN_MS = 3000;
const RENDER_MS = 60;
const KEY_STORAGE = 'gen_api_key';
const LIVE = new Set(['queued', 'running']);
// why a section failed or was cut (a manifest's `reasons`), as a flag's tooltip says it
const REASONS = {
  loops: 'it kept looping after its retries; the loops were cut',
  stalled: 'its rounds wrote no letter or digit; they were cut',
  truncated: 'it ended on the length limit (rounds, window or budget)',
  error: 'an error ended it',
};
const EVENT_TYPES = ['run_started', 'section_started', 'delta', 'round_finished', 'section_finished',
  'sources', 'error', 'run_finished'];

const state = {
  apiKey: localStorage.getItem(KEY_STORAGE) || '',
  pipelines: [],
  runs: new Map(),     // run_id -> entry of GET /v1/runs
  runOrder: [],        // run ids, newest first
  pollFailing: false,  // the server could not be reached on the last poll
  run: null,           // the selected run: newRunState()
};

function newRunState(id) {
  return {
    id, pipeline: '', model: '', source: '', created: '',
    status: '',           // shown: from the events, else /v1/runs and the manifest
    listStatus: '',       // what /v1/runs (or the manifest) last said
    es: null, esOpen: false, esEverOpen: false, esEnds: 0, retryTimer: null,
    lastSeq: 0,           // the last applied event
    finished: false,      // run_finished applied, and no run_started since
    startedAt: null,      // time of the last run_started (unix seconds)
    metrics: null,        // run_finished's metrics
    citations: null,      // a finished run's manifest `citations` (the document's figures)
    sourceFiles: null,    // the manifest's `sources` count: files read (null: no sources)
    hasDocument: false, docState: null, // docState: null | 'loading' | 'done'
    sections: new Map(),  // key -> section state, in the order first seen
    planned: 0,           // run_started's section count
    tps: [],              // {time, tps} per round_finished, for the sparkline
    errors: [],           // run-level messages (error events without a section, failed actions)
    timelineAt: 0, timelineSeq: 0, timelineTimer: null,
    dirty: new Set(), renderTimer: null,
  };
}

/* ---- 2. helpers ---------------------------------------------------------------------- */

const $ = (id) => document.getElementById(id);
const enc = encodeURIComponent;

/** h('div', {class: 'x', 'data-a': 1, onclick: fn}, child, 'text') */
function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v == null || v === false) continue;
    if (k === 'class') el.className = v;
    else if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children) if (c != null) el.append(c);
  return el;
}

function svg(tag, attrs = {}) {
  const el = document.createElementNS('http://www.w3.org/2000/svg', tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, String(v));
  return el;
}

function setText(el, text) { if (el.textContent !== text) el.textContent = text; }

const num = (n) => n != null && Number.isFinite(n);
const fmtInt = (n) => (num(n) ? Math.round(n).toLocaleString('en-US') : '–');
const fmtTps = (n) => (num(n) ? n.toFixed(n >= 100 ? 0 : 1) : '–');

function fmtDuration(s) {
  if (!num(s)) return '–';
  s = Math.max(0, s);
  const m = Math.floor(s / 60), pad = (x) => String(Math.floor(x)).padStart(2, '0');
  return s < 60 ? `${s.toFixed(1)}s` : m < 60 ? `${m}m ${pad(s % 60)}s` : `${Math.floor(m / 60)}h ${pad(m % 60)}m`;
}

function fmtCreated(iso) {
  const t = Date.parse(iso), ago = (Date.now() - t) / 1000;
  if (!Number.isFinite(t)) return iso || '';
  if (ago < 45) return 'just now';
  if (ago < 3600) return `${Math.round(ago / 60)} min ago`;
  if (ago < 86400) return `${Math.round(ago / 3600)} h ago`;
  return new Date(t).toLocaleString(undefined, { month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit' });
}

// Words as gen counts them (gen/pipeline/words.py): whitespace-separated tokens with a letter
// or digit, and each CJK character on its own. Used while a round is still streaming.
const CJK = '\\u3040-\\u30ff\\u3400-\\u4dbf\\u4e00-\\u9fff\\uf900-\\ufaff\\u{20000}-\\u{2fa1f}';
const TOKEN_RE = new RegExp(`[${CJK}]|[^\\s${CJK}]+`, 'gu');
const CJK_RE = new RegExp(`^[${CJK}]$`, 'u');
const WORDISH_RE = /[\p{L}\p{N}]/u;

function countWords(text) {
  let n = 0;
  for (const m of text.matchAll(TOKEN_RE)) if (CJK_RE.test(m[0]) || WORDISH_RE.test(m[0])) n++;
  return n;
}

/* ---- 3. api and key ------------------------------------------------------------------ */

class ApiError extends Error {
  constructor(status, payload) {
    const e = (payload && payload.error) || {};
    super(e.message || `HTTP ${status}`);
    this.status = status;
    this.code = e.code || null;
  }
}

/** fetch() with the Bearer key; JSON in and out (text when `accept` is something else). */
async function api(path, { method = 'GET', body, accept = 'application/json' } = {}) {
  const headers = { Accept: accept };
  if (state.apiKey) headers.Authorization = `Bearer ${state.apiKey}`;
  // every POST says JSON: the server refuses others (what another site could send unasked)
  if (body !== undefined || method !== 'GET') headers['Content-Type'] = 'application/json';
  const res = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  if (!res.ok) {
    let payload = null;
    try { payload = await res.json(); } catch { /* not JSON */ }
    if (res.status === 401) askForKey();
    throw new ApiError(res.status, payload);
  }
  return accept === 'application/json' ? res.json() : res.text();
}

/** EventSource, <img> and download links can't send a header: they authenticate with the
 * session cookie that POST /v1/session sets (HttpOnly: no script can read it). */
async function setKeyCookie(key) {
  try {
    await fetch('/v1/session', {
      method: 'POST',
      headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json' },
    });
  } catch { /* the next request says what is wrong */ }
}

function askForKey(manual = false) {
  if (!$('auth').hidden) return;
  const rejected = !manual && !!state.apiKey;
  $('auth-error').hidden = !rejected;
  setText($('auth-error'), rejected ? 'The saved key was not accepted.' : '');
  $('api-key').value = manual ? state.apiKey : '';
  $('auth').hidden = false;
  $('api-key').focus();
}

async function saveKey(ev) {
  ev.preventDefault();
  const key = $('api-key').value.trim();
  if (!key) return;
  state.apiKey = key;
  localStorage.setItem(KEY_STORAGE, key);
  await setKeyCookie(key);
  $('auth').hidden = true;
  $('change-key').hidden = false;
  loadModel(); // and everything else that may have failed with a 401, again
  loadPipelines();
  pollRuns();
  if (state.run) selectRun(state.run.id, true);
}

/* ---- 4. header ----------------------------------------------------------------------- */

async function loadModel() {
  try {
    const r = await api('/v1/models');
    setText($('model-name'), (r.data && r.data[0] && r.data[0].id) || '');
  } catch { /* the key form or the connection indicator says why */ }
}

/** #conn: live (stream open), reconnecting (stream or server lost), idle (no stream). */
function updateConn() {
  const run = state.run;
  let st = 'idle', label = 'idle';
  if (state.pollFailing) [st, label] = ['reconnecting', 'server unreachable'];
  else if (run && run.es && run.esOpen) [st, label] = ['live', 'live'];
  else if (run && run.es) [st, label] = ['reconnecting', run.esEverOpen ? 'reconnecting…' : 'connecting…'];
  const conn = $('conn');
  if (conn.dataset.state !== st) conn.dataset.state = st;
  setText(conn.querySelector('.conn-label'), label);
}

/* ---- 5. new run form ----------------------------------------------------------------- */

async function loadPipelines() {
  let r;
  try { r = await api('/v1/pipelines'); } catch (e) { showFormError(e.message); return; }
  state.pipelines = r.data || [];
  const select = $('pipeline');
  const wanted = select.value || localStorage.getItem('gen_pipeline');
  select.replaceChildren(...state.pipelines.map((p) =>
    h('option', { value: p.name, title: p.file || p.name }, p.error ? `${p.name} (invalid)` : p.name)));
  if (!state.pipelines.length) select.append(h('option', { value: '', disabled: true }, 'no pipelines'));
  const ok = state.pipelines.filter((p) => !p.error);
  const pick = ok.find((p) => p.name === wanted) || ok.find((p) => p.name === 'quickstart') || ok[0];
  if (pick) select.value = pick.name;
  renderInputs();
}

const currentPipeline = () => state.pipelines.find((p) => p.name === $('pipeline').value) || null;

/** One labelled field per input, pre-filled with its default (a textarea for long ones). */
function renderInputs() {
  const p = currentPipeline();
  const box = $('pipeline-inputs');
  box.replaceChildren();
  showFormError(p && p.error ? p.error : ''); // an invalid pipeline can't be started
  setText($('pipeline-desc'), p && !p.error ? p.description || '' : '');
  $('pipeline-desc').title = $('pipeline-desc').textContent; // clamped to a few lines
  $('new-run').querySelector('button[type=submit]').disabled = !p || !!p.error;
  if (!p || p.error) return;
  localStorage.setItem('gen_pipeline', p.name);
  for (const [name, def] of Object.entries(p.inputs || {})) {
    const text = typeof def === 'string' ? def : JSON.stringify(def);
    const field = text.length > 60 || text.includes('\n')
      ? h('textarea', { name, rows: Math.min(8, Math.max(3, text.split('\n').length + 1)) })
      : h('input', { name, type: 'text' });
    field.value = text;
    field.dataset.kind = typeof def === 'string' ? 'string' : 'json'; // numbers, lists: sent as JSON
    box.append(h('label', {}, name, field));
  }
}

function showFormError(message) {
  $('new-run-error').hidden = !message;
  setText($('new-run-error'), message || '');
}

async function submitRun(ev) {
  ev.preventDefault();
  const p = currentPipeline();
  if (!p || p.error) return;
  const inputs = {};
  for (const f of $('pipeline-inputs').querySelectorAll('input, textarea')) {
    let v = f.value;
    if (f.dataset.kind === 'json') { try { v = JSON.parse(v); } catch { /* sent as typed */ } }
    inputs[f.name] = v;
  }
  const button = $('new-run').querySelector('button[type=submit]');
  button.disabled = true;
  showFormError('');
  try {
    const r = await api('/v1/runs', { method: 'POST', body: { pipeline: p.name, inputs } });
    if (!state.runs.has(r.run_id)) { // shown at once; the next poll brings the real entry
      state.runs.set(r.run_id, { source: 'server', words: 0, created: new Date().toISOString(), ...r });
      state.runOrder.unshift(r.run_id);
      renderRuns();
    }
    selectViaHash(r.run_id);
    pollRuns();
  } catch (e) {
    showFormError(e.status === 429 ? `The run queue is full. ${e.message}` : e.message);
  } finally {
    button.disabled = false;
  }
}

/* ---- 6. runs list -------------------------------------------------------------------- */

let polling = false;

async function pollRuns() {
  if (polling) return;
  polling = true;
  try {
    const data = (await api('/v1/runs')).data || [];
    state.pollFailing = false;
    state.runs = new Map(data.map((x) => [x.run_id, x]));
    state.runOrder = data.map((x) => x.run_id);
    renderRuns();
    const run = state.run, entry = run && state.runs.get(run.id);
    if (entry) onRunInfo(run, entry);
  } catch (e) {
    state.pollFailing = !(e instanceof ApiError); // a network error, not an HTTP one
  } finally {
    polling = false;
    updateConn();
  }
}

/** Keyed update: existing items are changed in place, so nothing flickers every 2 s. */
function renderRuns() {
  const ul = $('runs');
  const old = new Map([...ul.children].map((li) => [li.dataset.runId, li]));
  const items = state.runOrder.map((id) => {
    const li = old.get(id) || buildRunItem(id);
    old.delete(id);
    updateRunItem(li, state.runs.get(id));
    return li;
  });
  old.forEach((li) => li.remove());
  items.forEach((li, i) => { if (ul.children[i] !== li) ul.insertBefore(li, ul.children[i] || null); });
  $('runs-empty').hidden = items.length > 0;
  setText($('runs-count'), items.length ? `(${items.length})` : '');
}

function buildRunItem(id) {
  const select = () => selectViaHash(id);
  return h('li', {
    class: 'run', 'data-run-id': id, role: 'option', tabindex: 0, onclick: select,
    onkeydown: (e) => { if (e.key === 'Enter' || e.key === ' ') { e.preventDefault(); select(); } },
  },
  h('span', { class: 'run-name' }), h('span', { class: 'badge' }),
  h('div', { class: 'run-sub' }, h('span', { class: 'run-id' }, id),
    h('span', { class: 'tag run-cli', title: 'written by a `gen run` process', hidden: true }, 'cli')),
  h('div', { class: 'run-sub' }, h('span', { class: 'run-words' }), h('span', { class: 'spacer' }),
    h('span', { class: 'run-created' })));
}

function updateRunItem(li, run) {
  const q = (sel) => li.querySelector(sel), badge = q('.badge');
  if (li.dataset.status !== run.status) li.dataset.status = badge.dataset.status = run.status;
  setText(badge, run.status);
  setText(q('.run-name'), run.pipeline || '');
  q('.run-cli').hidden = run.source !== 'cli';
  const parts = [`${fmtInt(run.words || 0)} words`];
  if (run.sections) parts.push(`${run.sections_completed || 0}/${run.sections} sections`);
  setText(q('.run-words'), parts.join(' · '));
  setText(q('.run-created'), fmtCreated(run.created));
  q('.run-created').title = run.created || '';
  const selected = !!state.run && state.run.id === run.run_id;
  li.classList.toggle('selected', selected);
  li.setAttribute('aria-selected', String(selected));
}

function runIdFromHash() {
  const m = /(?:^#|&)run=([^&]+)/.exec(location.hash);
  return m ? decodeURIComponent(m[1]) : null;
}

function selectViaHash(id) {
  const want = '#run=' + enc(id);
  if (location.hash !== want) location.hash = want; // -> hashchange -> selectRun()
  else selectRun(id);
}

/* ---- 7. selected run ----------------------------------------------------------------- */

function selectRun(id, force = false) {
  const old = state.run;
  if (!force && (old ? old.id : null) === id) return;
  if (old && old.es) old.es.close();
  if (old) [old.retryTimer, old.timelineTimer, old.renderTimer].forEach(clearTimeout);
  const run = (state.run = id ? newRunState(id) : null);
  $('sections').replaceChildren();
  $('document').replaceChildren();
  $('document-panel').hidden = true;
  $('timeline').hidden = true;
  $('timeline').removeAttribute('src');
  setText($('timeline-empty'), 'No timeline yet.');
  $('timeline-empty').hidden = false;
  $('empty-state').hidden = !!id;
  $('run-view').hidden = !id;
  renderRuns();
  if (!run) { updateConn(); return; }
  openStream(0);
  const entry = state.runs.get(id);
  if (entry) onRunInfo(run, entry);
  flush(run);
  loadManifest(run);
}

/** Status and details from /v1/runs or the manifest. */
function onRunInfo(run, info) {
  for (const k of ['pipeline', 'model', 'source', 'created']) if (info[k]) run[k] = info[k];
  if (info.document) run.hasDocument = true;
  if (info.status) {
    run.listStatus = info.status;
    // after run_finished, a lagging "running" is not shown: a resumed run sends run_started
    if (!run.finished || !LIVE.has(info.status)) run.status = info.status;
    if (LIVE.has(info.status) && !run.es) openStream(run.lastSeq); // resumed after we closed
  }
  maybeCloseStream(run);
  maybeLoadDocument(run);
  scheduleRender(run);
}

async function loadManifest(run) {
  let m;
  try { m = await api(`/v1/runs/${enc(run.id)}`); } catch (e) {
    if (state.run === run && e.status === 404) { run.errors.push(e.message); scheduleRender(run); }
    return;
  }
  if (state.run !== run) return;
  if (!run.metrics && m.metrics && !LIVE.has(m.status)) run.metrics = m.metrics;
  if (m.citations && !LIVE.has(m.status)) run.citations = m.citations;
  if (Array.isArray(m.sources)) run.sourceFiles = m.sources.length;
  for (const s of m.sections || []) { // a cached section sends no sources event
    const sec = run.sections.get(s.id);
    if (!sec) continue;
    if (s.passages && !sec.passages.length) sec.passages = s.passages;
    if (s.citing && !sec.citing) sec.citing = s.citing;
    run.dirty.add(sec);
  }
  onRunInfo(run, { ...m, document: !!m.document });
}

function renderRunHeader(run) {
  setText($('run-pipeline'), run.pipeline || '…');
  setText($('run-id'), run.id);
  const st = $('run-status');
  setText(st, run.status || '…');
  if (st.dataset.status !== run.status) st.dataset.status = run.status;
  setText($('run-model'), run.model || '');
  $('run-source').hidden = run.source !== 'cli';
  setText($('run-created'), run.created ? fmtCreated(run.created) : '');
  $('run-created').title = run.created || '';
  $('cancel-run').disabled = !LIVE.has(run.status);
  const resumable = run.status === 'failed' || run.status === 'cancelled';
  $('resume-run').hidden = $('resume-run').disabled = !resumable;
  $('run-error').hidden = run.errors.length === 0;
  setText($('run-error'), run.errors.join('\n'));
}

/** Live: summed from the sections (tok/s over wall time); once finished: run_finished's metrics. */
function renderTotals(run) {
  const secs = [...run.sections.values()];
  const m = !run.finished && run.startedAt != null ? null : run.metrics;
  const words = m ? m.words : secs.reduce((a, s) => a + shownWords(s), 0);
  const tokens = m ? m.completion_tokens : secs.reduce((a, s) => a + s.tokens, 0);
  const elapsed = m ? m.seconds : run.startedAt != null ? Date.now() / 1000 - run.startedAt : null;
  setText($('total-words'), fmtInt(words));
  setText($('total-tokens'), fmtInt(tokens));
  setText($('total-tps'), fmtTps(m ? m.tokens_per_second : elapsed > 0 && tokens ? tokens / elapsed : null));
  setText($('total-elapsed'), fmtDuration(elapsed));
  const done = secs.filter((s) => s.status === 'completed').length;
  const total = Math.max(secs.length, run.planned || 0);
  const failed = secs.filter((s) => s.failed || s.status === 'failed').length;
  setText($('total-sections'), total ? `${done} / ${total}` + (failed ? ` · ${failed} failed` : '') : '–');
  setText($('total-coherence'), coherence(m));
}

/** "overlap 9% · outline ✓" from a finished run's metrics; '–' before (or without either). */
function coherence(m) {
  if (!m) return '–';
  const parts = [];
  if (m.overlap_max != null) parts.push(`overlap ${Math.round(m.overlap_max * 100)}%`);
  if (m.outline_followed != null) {
    const wrong = [...(m.outline_missing || []).map((t) => `no heading for “${t}”`),
                   ...(m.headings_repeated || []).map((t) => `“${t}” twice`)];
    parts.push(m.outline_followed ? 'outline ✓' : `outline ✗ (${wrong.join('; ')})`);
  }
  return parts.length ? parts.join(' · ') : '–';
}

async function runAction(kind) { // 'cancel' | 'resume'
  const run = state.run;
  if (!run) return;
  $(`${kind}-run`).disabled = true;
  try {
    const r = await api(`/v1/runs/${enc(run.id)}/${kind}`, { method: 'POST' });
    if (state.run !== run) return;
    run.errors = [];
    if (r.status) run.status = run.listStatus = r.status;
    if (kind === 'resume') {
      run.docState = null;
      run.hasDocument = false;
      if (!run.es) openStream(run.lastSeq);
    }
  } catch (e) {
    if (state.run === run) run.errors.push(e.message); // e.g. 409: not resumable, already over
  }
  scheduleRender(run);
  pollRuns();
}

/* ---- 8. event stream ----------------------------------------------------------------- */

/** One EventSource for the selected run; `after` > 0 asks for the events after that seq. */
function openStream(after) {
  const run = state.run;
  if (!run) return;
  if (run.es) run.es.close();
  clearTimeout(run.retryTimer);
  const es = new EventSource(`/v1/runs/${enc(run.id)}/events${after > 0 ? `?last_event_id=${after}` : ''}`);
  Object.assign(run, { es, esOpen: false, esEnds: 0 });
  es.onopen = () => { if (run.es === es) { run.esOpen = run.esEverOpen = true; updateConn(); } };
  es.onerror = () => onStreamError(run, es);
  const handler = (m) => onMessage(run, es, m);
  for (const t of EVENT_TYPES) es.addEventListener(t, handler);
  es.onmessage = handler; // events sent without an `event:` line
  updateConn();
}

function closeStream(run) {
  if (run.es) run.es.close();
  Object.assign(run, { es: null, esOpen: false });
  clearTimeout(run.retryTimer);
  updateConn();
}

function onMessage(run, es, m) {
  if (state.run !== run || run.es !== es) return;
  let ev;
  try { ev = JSON.parse(m.data); } catch { return; }
  if (!run.esOpen) { run.esOpen = run.esEverOpen = true; updateConn(); }
  const seq = Number(ev.seq != null ? ev.seq : m.lastEventId);
  if (!Number.isFinite(seq) || seq <= run.lastSeq) return; // a replay never doubles text
  run.lastSeq = seq;
  applyEvent(run, ev);
}

function onStreamError(run, es) {
  if (state.run !== run || run.es !== es) return;
  run.esOpen = false;
  // The server ends the stream of a run that is over once it has replayed everything.
  if (run.listStatus && !LIVE.has(run.listStatus) && (run.finished || ++run.esEnds >= 2)) {
    closeStream(run);
    return;
  }
  if (es.readyState === EventSource.CLOSED) { // the browser gave up (an HTTP error): retry ourselves
    run.retryTimer = setTimeout(() => { if (state.run === run && run.es === es) openStream(run.lastSeq); }, 3000);
  } // else the browser reconnects by itself, sending Last-Event-ID
  updateConn();
}

/** Closes the stream once run_finished was applied and /v1/runs no longer says queued/running. */
function maybeCloseStream(run) {
  if (run.es && run.finished && run.listStatus && !LIVE.has(run.listStatus)) closeStream(run);
}

/* ---- 9. events ----------------------------------------------------------------------- */

function section(run, key, title) {
  let sec = run.sections.get(key);
  if (!sec) {
    sec = {
      key, title: key, status: 'pending', cached: false, text: '', round: 0, rounds: [], tokens: 0,
      words: null, target: null, lengthScore: null, degenerate: false,
      truncated: false, failed: false, reasons: [], error: null, lastAt: null,
      passages: [], citing: null, // the sources event's passages; section_finished's `citing`
    };
    sec.el = buildCard(sec);
    run.sections.set(key, sec);
    $('sections').append(sec.el.root);
  }
  if (title) sec.title = title;
  return sec;
}

function applyEvent(run, ev) {
  const sec = ev.section != null && !ev.type.startsWith('run_') ? section(run, ev.section, ev.title) : null;
  switch (ev.type) {
    case 'run_started':
      Object.assign(run, { finished: false, metrics: null, startedAt: ev.time, status: 'running', esEnds: 0 });
      if (ev.model) run.model = ev.model;
      if (ev.pipeline) run.pipeline = ev.pipeline;
      if (ev.sections) run.planned = ev.sections.length; // fan-out sections add keys later
      break;
    case 'section_started': {
      // The text is the deltas since the section's last section_started. A cached restart of
      // a completed section is that same text, taken from disk, so that one is kept.
      const keep = ev.cached && sec.status === 'completed' && sec.text;
      if (!keep) Object.assign(sec, { rounds: [], tokens: 0, words: null, round: ev.cached ? 0 : 1, passages: [], citing: null });
      if (!keep) setSectionText(sec, '');
      Object.assign(sec, { status: 'running', cached: !!ev.cached, error: null, degenerate: false, truncated: false,
        failed: false, reasons: [] });
      sec.lastAt = ev.time;
      if (ev.target_words != null) sec.target = ev.target_words;
      break;
    }
    case 'sources':
      sec.passages = Array.isArray(ev.passages) ? ev.passages : [];
      break;
    case 'delta':
      sec.status = 'running';
      if (ev.round) sec.round = ev.round;
      appendText(sec, ev.text || '');
      break;
    case 'round_finished': {
      const seconds = ev.seconds != null ? ev.seconds : sec.lastAt != null ? ev.time - sec.lastAt : null;
      let tps = ev.tokens_per_second;
      if (tps == null && seconds > 0) tps = (ev.completion_tokens || 0) / seconds;
      sec.rounds.push({ round: ev.round, finish: ev.finish_reason, stop: ev.stop_reason, tps });
      sec.tokens += ev.completion_tokens || 0;
      sec.round = ev.round || sec.rounds.length;
      if (ev.words != null) sec.words = ev.words;
      sec.lastAt = ev.time;
      if (num(tps)) run.tps.push({ time: ev.time, tps });
      break;
    }
    case 'section_finished':
      Object.assign(sec, {
        status: ev.status || 'completed', cached: !!ev.cached, lengthScore: ev.length_score ?? null,
        truncated: !!ev.truncated, degenerate: !!ev.degenerate,
        // an event written before `failed` was: degenerate was the failure then
        failed: ev.failed ?? !!ev.degenerate, reasons: ev.reasons || [],
      });
      if (ev.words != null) sec.words = ev.words;
      if (ev.target_words != null) sec.target = ev.target_words;
      if (!sec.rounds.length && ev.rounds) sec.round = ev.rounds;
      if (ev.citing) sec.citing = ev.citing;
      break;
    case 'error':
      if (sec) Object.assign(sec, { status: 'failed', error: ev.message });
      else run.errors.push(ev.message);
      break;
    case 'run_finished':
      Object.assign(run, { finished: true, status: ev.status || run.status, metrics: ev.metrics || null });
      if (ev.document) run.hasDocument = true;
      for (const s of run.sections.values()) {
        if ((s.status === 'running' || s.status === 'pending') && ev.status !== 'completed') {
          s.status = ev.status;
          run.dirty.add(s);
        }
      }
      loadManifest(run); // the status from the server: then the stream may close
      refreshTimeline(run, true);
      break;
    default:
      return;
  }
  if (sec) run.dirty.add(sec);
  scheduleRender(run);
}

/** A section card; hooks: .section[data-section][data-status], .section-round, .words-bar, .section-text */
function buildCard(sec) {
  const el = {
    title: h('span'), badge: h('span', { class: 'badge section-status' }),
    round: h('span', { class: 'section-round' }), chips: h('span', { class: 'chips' }),
    tps: h('span', { class: 'section-tps' }), flags: h('span', { class: 'flags' }),
    fill: h('div', { class: 'words-fill' }), label: h('span', { class: 'words-label' }),
    text: h('pre', { class: 'section-text', 'data-empty': '', 'data-placeholder': 'waiting…' }),
    error: h('div', { class: 'section-error', hidden: true }), node: document.createTextNode(''),
    sourcesLabel: h('span'), passages: h('ol', { class: 'passages' }), citing: h('div', { class: 'citing' }),
  };
  el.sources = h('details', { class: 'section-sources', open: true, hidden: true },
    h('summary', {}, el.sourcesLabel), el.passages, el.citing);
  el.text.append(el.node); // the live text: one text node, appended to
  el.bar = h('div', { class: 'words-bar', role: 'progressbar', 'aria-valuemin': 0 }, el.fill);
  el.root = h('article', { class: 'panel section', 'data-section': sec.key, 'data-status': sec.status },
    h('header', {}, h('h3', {}, el.title, h('code', {}, sec.key)), el.badge),
    h('div', { class: 'section-stats' }, el.round, el.chips, el.tps, el.flags),
    h('div', { class: 'words' }, el.bar, el.label), el.sources, el.text, el.error);
  return el;
}

function setSectionText(sec, text) {
  sec.text = sec.el.node.data = text;
  sec.el.text.toggleAttribute('data-empty', !text);
}

function appendText(sec, text) {
  if (!text) return;
  const pre = sec.el.text;
  const follow = pre.scrollHeight - pre.scrollTop - pre.clientHeight < 40; // unless scrolled up
  sec.text += text;
  sec.el.node.appendData(text);
  pre.removeAttribute('data-empty');
  if (follow && sec.status === 'running') pre.scrollTop = pre.scrollHeight;
}

const shownWords = (s) => (s.status === 'running' || s.words == null ? countWords(s.text) : s.words);

function renderSection(sec) {
  const el = sec.el;
  if (el.root.dataset.status !== sec.status) el.root.dataset.status = sec.status;
  el.badge.dataset.status = sec.status;
  setText(el.title, sec.title);
  setText(el.badge, sec.status);
  el.round.dataset.round = String(sec.round || 0);
  setText(el.round, sec.cached && !sec.rounds.length ? 'cached' : sec.round ? `round ${sec.round}` : '');
  if (el.chips.childElementCount !== sec.rounds.length) {
    el.chips.replaceChildren(...sec.rounds.map((r) => h('span', {
      class: 'chip', 'data-reason': r.stop || r.finish || '?',
      title: `round ${r.round}: finish_reason ${r.finish}` + (r.stop ? `, stop_reason ${r.stop}` : '') +
        (num(r.tps) ? `, ${fmtTps(r.tps)} tok/s` : ''),
    }, r.stop || r.finish || '?')));
  }
  const last = sec.rounds[sec.rounds.length - 1];
  setText(el.tps, last && num(last.tps) ? `${fmtTps(last.tps)} tok/s` : '');
  const flags = [
    sec.failed && h('span', {
      class: 'flag bad failed', 'data-reasons': sec.reasons.join(' '),
      title: sec.reasons.map((r) => REASONS[r] || r).join('; ') || 'it failed',
    }, sec.reasons.length ? `failed: ${sec.reasons.join(', ')}` : 'failed'),
    !sec.failed && sec.truncated && h('span', { class: 'flag warn truncated', title: REASONS.truncated }, 'truncated'),
    sec.cached && h('span', { class: 'flag info', title: 'reused from an earlier run' }, 'cached'),
    sec.lengthScore != null && h('span', { class: 'flag info', title: 'length score S_l' }, `S_l ${Math.round(sec.lengthScore * 10) / 10}`),
  ].filter(Boolean);
  const sig = flags.map((f) => f.textContent).join('|');
  if (el.flags.dataset.sig !== sig) { el.flags.dataset.sig = sig; el.flags.replaceChildren(...flags); }
  const words = shownWords(sec);
  const pct = sec.target ? Math.min(100, (100 * words) / sec.target) : sec.status === 'completed' ? 100 : 0;
  el.fill.style.width = `${pct.toFixed(1)}%`; // full at the target
  el.bar.dataset.words = String(words);
  el.bar.setAttribute('aria-valuenow', String(words));
  if (sec.target) { el.bar.dataset.target = String(sec.target); el.bar.setAttribute('aria-valuemax', String(sec.target)); }
  setText(el.label, sec.target ? `${fmtInt(words)} / ${fmtInt(sec.target)}` : `${fmtInt(words)} words`);
  el.text.dataset.placeholder = sec.cached ? 'reused from an earlier run (its text is in the document)'
    : sec.status === 'running' ? 'generating…' : sec.status === 'pending' ? 'waiting…' : '(no text)';
  el.error.hidden = !sec.error;
  setText(el.error, sec.error || '');
  renderSectionSources(sec);
}

/** Batches DOM work: a replay can bring thousands of events at once. */
function scheduleRender(run) {
  if (!run.renderTimer) {
    run.renderTimer = setTimeout(() => { run.renderTimer = null; if (state.run === run) flush(run); }, RENDER_MS);
  }
}

function flush(run) {
  for (const sec of run.sections.values()) if (sec.status === 'running') run.dirty.add(sec);
  run.dirty.forEach(renderSection);
  run.dirty.clear();
  $('sections-empty').hidden = run.sections.size > 0;
  setText($('sections-empty'), LIVE.has(run.status) || !run.status ? 'Waiting for the run to start…' : 'No sections.');
  renderRunHeader(run);
  renderTotals(run);
  renderCitations(run);
  renderSparkline(run);
  refreshTimeline(run, false);
}

/* ---- 9b. citations ------------------------------------------------------------------- */

const fmtShare = (x) => (num(x) ? `${Math.round(x * 100)}%` : '–');
const counted = (n, what) => `${fmtInt(n)} ${what}${n === 1 ? '' : 's'}`;

/** The run's figures: the finished manifest's, else summed from the sections finished so far
 * (References are numbered only when the document is written). Shown for a run with sources. */
function renderCitations(run) {
  const secs = [...run.sections.values()];
  const shown = run.sourceFiles != null || secs.some((s) => s.passages.length || s.citing);
  $('citations-panel').hidden = !shown;
  if (!shown) return;
  const c = run.citations || sumCiting(secs.map((s) => s.citing).filter(Boolean));
  setText($('cite-references'), num(c.references) ? fmtInt(c.references) : '–');
  setText($('cite-model'), fmtInt(c.model_citations) + (c.citations_dropped ? ` · ${fmtInt(c.citations_dropped)} dropped` : ''));
  setText($('cite-attributed'), fmtInt(c.attributed));
  setText($('cite-supported'), fmtShare(c.supported_share));
  setText($('cite-unsupported'), fmtInt(c.unsupported_facts));
  setText($('citations-note'), run.sourceFiles != null ? `from ${fmtInt(run.sourceFiles)} source files` : '');
}

/** The document's figures from its sections' (orchestrator `_sources_json` does the same). */
function sumCiting(all) {
  const add = (k) => all.reduce((a, c) => a + (c[k] || 0), 0);
  const sentences = add('cited_sentences');
  const supported = all.reduce((a, c) => a + (c.supported_share || 0) * (c.cited_sentences || 0), 0);
  return {
    references: null, model_citations: add('citations'), citations_dropped: add('citations_dropped'),
    attributed: add('attributed'), supported_share: sentences ? supported / sentences : null,
    unsupported_facts: add('unsupported_count'),
  };
}

/** A card's passages ([n] path, location, score) and, once it is done, its figures. */
function renderSectionSources(sec) {
  const el = sec.el, c = sec.citing;
  el.sources.hidden = !sec.passages.length && !c;
  const sig = JSON.stringify([sec.passages.map((p) => p.id), c]);
  if (el.sources.dataset.sig === sig) return;
  el.sources.dataset.sig = sig;
  const n = sec.passages.length;
  setText(el.sourcesLabel, `Sources: ${counted(n, 'passage')} shown`);
  el.passages.replaceChildren(...sec.passages.map((p, i) => h('li', { class: 'passage', 'data-id': p.id },
    h('span', { class: 'passage-number' }, `[${i + 1}]`), ' ',
    h('span', { class: 'passage-path' }, p.path || ''), ' ',
    h('span', { class: 'passage-location' }, p.location || ''), ' ',
    h('span', { class: 'passage-score', title: 'BM25 score against the section' }, num(p.score) ? `score ${p.score}` : ''))));
  el.citing.hidden = !c;
  if (!c) { el.citing.replaceChildren(); return; }
  const facts = c.unsupported_facts || [];
  el.citing.replaceChildren(
    h('span', { class: 'cite-model' }, counted(c.citations, 'model citation') +
      (c.citations_dropped ? ` · ${fmtInt(c.citations_dropped)} dropped` : '')),
    h('span', { class: 'cite-attributed' }, `${fmtInt(c.attributed)} gen-attributed`),
    h('span', { class: 'cite-supported', title: 'share of the model-cited sentences their passages bear out' },
      `supported ${fmtShare(c.supported_share)}`),
    h('span', { class: 'cite-unsupported', title: facts.join('\n') || 'no sentence with a figure or name the passages lack' },
      counted(c.unsupported_count ?? facts.length, 'unsupported fact')));
}

/* ---- 10. charts ---------------------------------------------------------------------- */

/** The server draws the timeline from the events; reloaded at most every 3 s, and at the end. */
function refreshTimeline(run, force) {
  if (!run.lastSeq || run.timelineSeq === run.lastSeq) return;
  const wait = TIMELINE_MIN_MS - (Date.now() - run.timelineAt);
  if (!force && wait > 0) {
    if (!run.timelineTimer) {
      run.timelineTimer = setTimeout(() => {
        run.timelineTimer = null;
        if (state.run === run) refreshTimeline(run, true);
      }, wait);
    }
    return;
  }
  clearTimeout(run.timelineTimer);
  Object.assign(run, { timelineTimer: null, timelineAt: Date.now(), timelineSeq: run.lastSeq });
  $('timeline').src = `/v1/runs/${enc(run.id)}/timeline.svg?v=${run.lastSeq}`;
}

function onTimelineLoad(ok) {
  $('timeline').hidden = !ok;
  $('timeline-empty').hidden = ok;
  if (!ok) setText($('timeline-empty'), 'The timeline is not available.');
}

/** tokens/s of each finished round against its time; a polyline over a faint area. */
function renderSparkline(run) {
  const el = $('tps-sparkline'), pts = run.tps;
  if (el.dataset.points === String(pts.length)) return;
  el.dataset.points = String(pts.length);
  if (!pts.length) {
    el.replaceChildren();
    setText($('tps-label'), 'no finished rounds yet');
    return;
  }
  const W = 300, H = 90, pad = 6;
  const t0 = pts[0].time, span = pts[pts.length - 1].time - t0;
  const top = Math.max(...pts.map((p) => p.tps)), max = top * 1.1 || 1;
  const xy = pts.map((p, i) => [
    span > 0 ? ((p.time - t0) / span) * W : pts.length > 1 ? (i / (pts.length - 1)) * W : W / 2,
    H - pad - (p.tps / max) * (H - 2 * pad),
  ]);
  if (xy.length === 1) xy.splice(0, 1, [xy[0][0] - 10, xy[0][1]], [xy[0][0] + 10, xy[0][1]]);
  const line = xy.map(([x, y]) => `${x.toFixed(1)},${y.toFixed(1)}`).join(' ');
  const area = `${xy[0][0].toFixed(1)},${H} ${line} ${xy[xy.length - 1][0].toFixed(1)},${H}`;
  const title = svg('title');
  title.textContent = `tokens/s of ${pts.length} rounds`;
  const flat = { 'vector-effect': 'non-scaling-stroke' };
  el.replaceChildren(title, svg('line', { class: 'grid', x1: 0, x2: W, y1: H / 2, y2: H / 2, ...flat }),
    svg('polygon', { class: 'area', points: area }), svg('polyline', { class: 'line', points: line, ...flat }));
  setText($('tps-label'), `last ${fmtTps(pts[pts.length - 1].tps)} · max ${fmtTps(top)}`);
}

/* ---- 11. document -------------------------------------------------------------------- */

function maybeLoadDocument(run) {
  if (run.status === 'completed' && run.hasDocument && !run.docState) loadDocument(run);
}

async function loadDocument(run) {
  run.docState = 'loading';
  let html;
  try {
    html = await api(`/v1/runs/${enc(run.id)}/document`, { accept: 'text/html' });
  } catch (e) {
    if (state.run !== run) return;
    run.docState = e.status === 409 || e.status === 401 ? null : 'done'; // 409: not yet; tried on the next poll
    if (run.docState) { run.errors.push(e.message); scheduleRender(run); }
    return;
  }
  if (state.run !== run) return;
  const doc = new DOMParser().parseFromString(html, 'text/html');
  sanitize(doc.body);
  localAnchors(doc.body);
  $('document').replaceChildren(...[...doc.body.childNodes].map((n) => document.importNode(n, true)));
  const link = $('download');
  link.href = `/v1/runs/${enc(run.id)}/document`; // the cookie authenticates
  link.setAttribute('download', `${run.pipeline || 'document'}-${run.id}.md`);
  $('document-panel').hidden = false;
  run.docState = 'done';
}

/** Belt and braces (the server escapes raw HTML already): no scripts, handlers or js: URLs. */
function sanitize(root) {
  root.querySelectorAll('script, style, iframe, frame, object, embed, link, meta, base, form').forEach((n) => n.remove());
  for (const el of root.querySelectorAll('*')) {
    for (const a of [...el.attributes]) {
      const name = a.name.toLowerCase();
      const url = /(^|:)(href|src|action|formaction|srcset)$/.test(name);
      const bad = /^\s*(javascript|vbscript|data):/i.test(a.value) && !/^\s*data:image\/(png|jpe?g|gif|webp);/i.test(a.value);
      if (name.startsWith('on') || (url && bad)) el.removeAttribute(a.name);
    }
    if (el.tagName === 'A' && /^https?:/i.test(el.getAttribute('href') || '')) {
      el.setAttribute('target', '_blank');
      el.setAttribute('rel', 'noopener noreferrer');
    }
  }
}

/** The document's own anchors (its References' #ref-n) would change the page's #run= hash:
 * ids get a `doc-` prefix and a click on an in-document link scrolls to its target instead. */
function localAnchors(root) {
  for (const el of root.querySelectorAll('[id]')) el.id = `doc-${el.id}`;
  for (const a of root.querySelectorAll('a[href^="#"]')) {
    let id = a.getAttribute('href').slice(1);
    try { id = decodeURIComponent(id); } catch { /* as written */ }
    a.dataset.target = `doc-${id}`;
  }
}

function followAnchor(ev) {
  const a = ev.target.closest && ev.target.closest('a[data-target]');
  if (!a) return;
  ev.preventDefault();
  const target = document.getElementById(a.dataset.target);
  if (target) target.scrollIntoView({ block: 'center' });
}

/* ---- 12. boot ------------------------------------------------------------------------ */

async function boot() {
  if (state.apiKey) { await setKeyCookie(state.apiKey); $('change-key').hidden = false; }
  $('auth-form').addEventListener('submit', saveKey);
  $('change-key').addEventListener('click', () => askForKey(true));
  $('auth').addEventListener('keydown', (e) => { if (e.key === 'Escape') $('auth').hidden = true; });
  $('pipeline').addEventListener('change', renderInputs);
  $('new-run').addEventListener('submit', submitRun);
  $('document').addEventListener('click', followAnchor);
  $('cancel-run').addEventListener('click', () => runAction('cancel'));
  $('resume-run').addEventListener('click', () => runAction('resume'));
  $('timeline').addEventListener('load', () => onTimelineLoad(true));
  $('timeline').addEventListener('error', () => onTimelineLoad(false));
  window.addEventListener('hashchange', () => selectRun(runIdFromHash()));
  loadModel();
  loadPipelines();
  pollRuns();
  selectRun(runIdFromHash());
  setInterval(pollRuns, POLL_MS);
  setInterval(() => { // the elapsed time and "n min ago"
    const run = state.run;
    if (run && !run.finished && run.startedAt != null) renderTotals(run);
    if (run) setText($('run-created'), run.created ? fmtCreated(run.created) : '');
  }, 1000);
}

// Hooks for browser tests.
window.genDashboard = {
  /** Closes the current EventSource and opens a new one with ?last_event_id=<last applied seq>. */
  restartStream() { if (state.run) openStream(state.run.lastSeq); },
  lastSeq() { return state.run ? state.run.lastSeq : 0; },
  sectionText(key) {
    const sec = state.run && state.run.sections.get(key);
    return sec ? sec.text : null;
  },
};

if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', boot);
else boot();
