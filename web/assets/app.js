// Sunset's page. It reads Sunset's JSON API only (apis/sunset.dev/v1, by a
// URL relative to the page, so it works behind kubectl port-forward and
// path-prefixing proxies) and draws what it answers. Everything the API
// sends is data: it goes into the page as text, never as markup.
'use strict';

(() => {
  const API = 'apis/sunset.dev/v1/';
  const TOKEN_KEY = 'sunset.token';
  const HOUR = 3600 * 1000;
  const DAY = 24 * HOUR;
  const root = document.documentElement;
  const main = document.getElementById('main');

  // ---- DOM helpers ------------------------------------------------------

  // h builds an element: attributes from an object (class, data-*, on*
  // handlers), children as nodes or text.
  function h(tag, attrs, ...children) {
    return build(document.createElement(tag), attrs, children);
  }

  const SVG = 'http://www.w3.org/2000/svg';
  function s(tag, attrs, ...children) {
    return build(document.createElementNS(SVG, tag), attrs, children);
  }

  function build(el, attrs, children) {
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
      else el.setAttribute(k, v === true ? '' : String(v));
    }
    for (const c of children.flat(Infinity)) {
      if (c === undefined || c === null || c === false) continue;
      el.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return el;
  }

  const fmt = (n) => Number(n || 0).toLocaleString('en-US');
  const plural = (n, one, many) => `${fmt(n)} ${n === 1 ? one : many}`;

  // windowLabel names a window of hours the way people say it.
  function windowLabel(hours) {
    if (hours % 24 === 0 && hours >= 48) return `${hours / 24} days`;
    return `${hours} h`;
  }

  // hoursOf reads a Go duration such as "720h0m0s" in whole hours.
  function hoursOf(d) {
    const m = /^(?:(\d+)h)?(?:(\d+)m)?(?:(\d+(?:\.\d+)?)s)?$/.exec(d || '');
    if (!m) return 0;
    return Number(m[1] || 0) + Number(m[2] || 0) / 60 + Number(m[3] || 0) / 3600;
  }

  function utc(t, withMinutes = true) {
    const d = new Date(t);
    const p = (n) => String(n).padStart(2, '0');
    const day = `${d.getUTCFullYear()}-${p(d.getUTCMonth() + 1)}-${p(d.getUTCDate())}`;
    return withMinutes ? `${day} ${p(d.getUTCHours())}:${p(d.getUTCMinutes())} UTC` : day;
  }

  function groupVersion(group, version) {
    return group ? `${group}/${version}` : version;
  }

  function replacementText(st) {
    const r = st.replacement;
    return r ? `${groupVersion(r.group, r.version)} ${r.kind}` : '';
  }

  // ---- the page's state, all of it in the URL ---------------------------

  function state() {
    const p = new URLSearchParams(location.search);
    return {
      api: p.get('api') || '',
      user: p.get('user') || '',
      cluster: p.get('cluster') || '',
      since: p.get('since') || '',
      target: p.get('target') || '',
      system: p.get('system') !== 'hide',
      view: p.get('view') || '',
    };
  }

  // href is the page's URL with some parameters changed ('' removes one).
  function href(changes) {
    const p = new URLSearchParams(location.search);
    for (const [k, v] of Object.entries(changes)) {
      if (v === '' || v === null || v === undefined) p.delete(k);
      else p.set(k, v);
    }
    const q = p.toString();
    return q ? `?${q}` : './';
  }

  function go(url) {
    history.pushState(null, '', url);
    render();
  }

  // Links inside the page change the view without reloading it.
  function nav(url, ...children) {
    return h('a', {
      href: url,
      onclick: (e) => {
        if (e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
        e.preventDefault();
        go(url);
      },
    }, ...children);
  }

  // ---- reading the API ---------------------------------------------------

  class APIError extends Error {
    constructor(status, message) {
      super(message);
      this.status = status;
    }
  }

  async function messageOf(resp) {
    try {
      const body = await resp.json();
      if (body && body.message) return body.message;
    } catch (_) {
      // not JSON: say what the status says
    }
    return `${resp.status} ${resp.statusText}`;
  }

  // get reads one API path; on 401 it asks for a bearer token and tries
  // again with it.
  async function get(path, query) {
    const url = new URL(API + path, document.baseURI);
    for (const [k, v] of Object.entries(query || {})) {
      if (v !== '' && v !== null && v !== undefined) url.searchParams.set(k, v);
    }
    for (;;) {
      const headers = { Accept: 'application/json' };
      const token = sessionStorage.getItem(TOKEN_KEY);
      if (token) headers.Authorization = `Bearer ${token}`;
      const resp = await fetch(url, { headers, cache: 'no-store', credentials: 'same-origin' });
      if (resp.status === 401) {
        await askToken(await messageOf(resp), Boolean(token));
        continue;
      }
      if (!resp.ok) throw new APIError(resp.status, await messageOf(resp));
      return resp.json();
    }
  }

  // askToken shows the token form once, however many reads are waiting.
  let pendingToken = null;
  function askToken(reason, hadToken) {
    if (pendingToken) return pendingToken;
    const dialog = document.getElementById('token-dialog');
    const form = document.getElementById('token-form');
    const input = document.getElementById('token-input');
    document.getElementById('token-reason').textContent =
      (hadToken ? 'The token was refused: ' : 'Reading this server needs credentials: ') + reason;
    root.dataset.state = 'auth';
    pendingToken = new Promise((resolve, reject) => {
      const submitted = () => {
        dialog.removeEventListener('cancel', cancelled);
        sessionStorage.setItem(TOKEN_KEY, input.value.trim());
        input.value = '';
        pendingToken = null;
        root.dataset.state = 'loading';
        showForget();
        resolve();
      };
      // Escape: no token, so nothing to show but why.
      const cancelled = () => {
        form.removeEventListener('submit', submitted);
        pendingToken = null;
        reject(new APIError(401, reason));
      };
      form.addEventListener('submit', submitted, { once: true });
      dialog.addEventListener('cancel', cancelled, { once: true });
    });
    if (!dialog.open) dialog.showModal();
    input.focus();
    return pendingToken;
  }

  function showForget() {
    document.getElementById('forget-token').hidden = !sessionStorage.getItem(TOKEN_KEY);
  }

  // ---- filters -----------------------------------------------------------

  // windows offered: a day, a week, 30 days and the whole retention, none
  // longer than the retention.
  function windows(retentionHours) {
    const out = [24, 168, 720].filter((w) => w <= retentionHours);
    if (retentionHours >= 24 && !out.includes(Math.floor(retentionHours))) out.push(Math.floor(retentionHours));
    return out;
  }

  function sinceHours(st, info) {
    const retention = hoursOf(info.retention) || 720;
    const asked = hoursOf(st.since);
    if (asked >= 1 && asked <= retention) return Math.floor(asked);
    return Math.min(720, Math.floor(retention));
  }

  function setupFilters(info, st) {
    const cluster = document.getElementById('f-cluster');
    const names = info.clusters.includes(st.cluster) || !st.cluster ? info.clusters : [...info.clusters, st.cluster];
    cluster.replaceChildren(h('option', { value: '' }, 'all'), ...names.map((c) => h('option', { value: c }, c)));
    cluster.value = st.cluster;
    const since = document.getElementById('f-since');
    const hours = sinceHours(st, info);
    const options = windows(hoursOf(info.retention) || 720);
    if (!options.includes(hours)) options.push(hours);
    options.sort((a, b) => a - b);
    since.replaceChildren(...options.map((w) => h('option', { value: `${w}h` }, windowLabel(w))));
    since.value = `${hours}h`;
    document.getElementById('f-system').checked = st.system;
  }

  function wireFilters() {
    const form = document.getElementById('filters');
    form.addEventListener('submit', (e) => e.preventDefault());
    document.getElementById('f-cluster').addEventListener('change', (e) => go(href({ cluster: e.target.value })));
    document.getElementById('f-since').addEventListener('change', (e) => go(href({ since: e.target.value })));
    document.getElementById('f-system').addEventListener('change', (e) => go(href({ system: e.target.checked ? '' : 'hide' })));
    document.getElementById('forget-token').addEventListener('click', () => {
      sessionStorage.removeItem(TOKEN_KEY);
      showForget();
      render();
    });
    document.getElementById('home').addEventListener('click', (e) => {
      e.preventDefault();
      go(href({ api: '', user: '', view: '' }));
    });
  }

  // ---- counting what the API says ---------------------------------------

  // use is an API's requests in the last 24 h and in the window, without
  // system identities unless they are shown.
  function use(item, showSystem) {
    const st = item.status;
    const w = st.window || { requestCount: 0 };
    const day = st.requestCount - (showSystem ? 0 : st.systemRequestCount || 0);
    const win = w.requestCount - (showSystem ? 0 : w.systemRequestCount || 0);
    const systemOnly = w.requestCount + st.requestCount > 0 &&
      w.requestCount === (w.systemRequestCount || 0) && st.requestCount === (st.systemRequestCount || 0);
    return { day, win, systemOnly };
  }

  function release(r) {
    if (!r) return [Infinity, Infinity];
    return r.split('.').map(Number);
  }

  // byUrgency orders APIs as `sunset check` orders its findings: already
  // removed first, then by removal release, soonest first, APIs without a
  // planned removal last, then by name.
  function byUrgency(a, b) {
    const ra = a.status.removed ? 0 : 1;
    const rb = b.status.removed ? 0 : 1;
    if (ra !== rb) return ra - rb;
    const [ma, na] = release(a.status.removedInRelease);
    const [mb, nb] = release(b.status.removedInRelease);
    if (ma !== mb) return ma < mb ? -1 : 1;
    if (na !== nb) return na < nb ? -1 : 1;
    return a.metadata.name < b.metadata.name ? -1 : 1;
  }

  function removalBadges(st) {
    const out = [];
    if (st.removed) out.push(h('span', { class: 'badge removed', 'data-removed': '' }, 'already removed: clients get 404'));
    return out;
  }

  // buckets sums a window's hours into n equal spans from its start: hours
  // for short windows, days for long ones.
  function buckets(w) {
    const hours = hoursOf(w.since);
    const from = Date.parse(w.from);
    const end = from + hours * HOUR; // the current hour
    const span = hours > 48 ? DAY : HOUR;
    const start = span === DAY ? Math.floor(from / DAY) * DAY : from;
    const n = Math.floor((end - start) / span) + 1;
    const out = Array.from({ length: n }, (_, i) => ({ at: start + i * span, user: 0, system: 0 }));
    for (const hr of w.byHour || []) {
      const i = Math.floor((Date.parse(hr.hour) - start) / span);
      if (i < 0 || i >= n) continue;
      out[i].system += hr.systemRequestCount || 0;
      out[i].user += hr.requestCount - (hr.systemRequestCount || 0);
    }
    return { span, list: out };
  }

  // ---- charts: plain SVG -------------------------------------------------

  // spark is the small per-API bar chart of the overview.
  function spark(w, showSystem) {
    const { span, list } = buckets(w);
    const width = 120;
    const height = 28;
    const max = Math.max(1, ...list.map((b) => b.user + (showSystem ? b.system : 0)));
    const bw = width / list.length;
    const svg = s('svg', {
      class: 'spark', viewBox: `0 0 ${width} ${height}`, preserveAspectRatio: 'none', role: 'img',
      'aria-label': `requests per ${span === DAY ? 'day' : 'hour'} over the window`,
    });
    list.forEach((b, i) => {
      const total = b.user + (showSystem ? b.system : 0);
      if (total === 0) return;
      const hu = Math.max(1, (b.user / max) * height);
      const hs = showSystem && b.system ? Math.max(1, (b.system / max) * height) : 0;
      const title = s('title', {}, `${span === DAY ? utc(b.at, false) : utc(b.at)}: ${plural(total, 'request', 'requests')}`);
      const g = s('g', {}, title);
      if (b.user) g.append(s('rect', { class: 'bar', x: i * bw, y: height - hu, width: Math.max(bw - 0.5, 0.5), height: hu }));
      if (hs) g.append(s('rect', { class: 'bar system', x: i * bw, y: height - hu * (b.user ? 1 : 0) - hs, width: Math.max(bw - 0.5, 0.5), height: hs }));
      svg.append(g);
    });
    return svg;
  }

  // hourlyChart draws every hour of the window, with axes.
  function hourlyChart(w, showSystem) {
    const hours = hoursOf(w.since);
    const from = Date.parse(w.from);
    const n = hours + 1;
    const byHour = new Map((w.byHour || []).map((hr) => [Date.parse(hr.hour), hr]));
    const left = 44;
    const bottom = 22;
    const width = 760;
    const height = 200;
    const plotW = width - left - 8;
    const plotH = height - bottom - 10;
    let max = 0;
    for (const hr of byHour.values()) max = Math.max(max, hr.requestCount - (showSystem ? 0 : hr.systemRequestCount || 0));
    max = Math.max(max, 1);
    const bw = plotW / n;
    const svg = s('svg', {
      class: 'chart', id: 'hourly', viewBox: `0 0 ${width} ${height}`, role: 'img',
      'aria-label': `requests per hour from ${utc(from)}, ${plural(n, 'hour', 'hours')}`,
    });
    const y0 = 10 + plotH;
    svg.append(
      s('line', { class: 'axis', x1: left, y1: y0, x2: width - 8, y2: y0 }),
      s('line', { class: 'axis', x1: left, y1: 10, x2: left, y2: y0 }),
      s('text', { x: left - 6, y: 14, 'text-anchor': 'end' }, fmt(max)),
      s('text', { x: left - 6, y: y0, 'text-anchor': 'end' }, '0'),
    );
    // Labels: every 6 hours for a day or two, else every few days at 00:00.
    const everyHours = n <= 49 ? 6 : 24 * Math.max(1, Math.ceil(hours / 24 / 8));
    for (let i = 0; i < n; i++) {
      const t = from + i * HOUR;
      const d = new Date(t);
      if (d.getUTCHours() % 24 !== 0 && n > 49) continue;
      if ((Math.round(t / HOUR) % everyHours) !== 0) continue;
      const label = n <= 49 ? `${String(d.getUTCHours()).padStart(2, '0')}:00` : utc(t, false).slice(5);
      svg.append(s('text', { x: left + i * bw, y: height - 6, 'text-anchor': 'middle' }, label));
    }
    for (let i = 0; i < n; i++) {
      const t = from + i * HOUR;
      const hr = byHour.get(t);
      if (!hr) continue;
      const sys = hr.systemRequestCount || 0;
      const user = hr.requestCount - sys;
      const shown = user + (showSystem ? sys : 0);
      if (shown === 0) continue;
      const hu = (user / max) * plotH;
      const hs = showSystem ? (sys / max) * plotH : 0;
      const g = s('g', { 'data-hour': new Date(t).toISOString(), 'data-count': shown },
        s('title', {}, `${utc(t)}: ${plural(shown, 'request', 'requests')}` +
          (sys && showSystem ? ` (${fmt(sys)} by system users)` : '') + (hr.dryRunCount ? `, ${fmt(hr.dryRunCount)} dry runs` : '')));
      // At least 2 units wide, so that a lone hour in 30 days shows.
      const bwid = Math.max(bw - Math.min(2, bw * 0.2), 2);
      const x = Math.min(left + i * bw + Math.min(1, bw * 0.1), width - 8 - bwid);
      if (user) g.append(s('rect', { class: 'bar', x, y: y0 - hu, width: bwid, height: Math.max(hu, 1) }));
      if (hs) g.append(s('rect', { class: 'bar system', x, y: y0 - hu - hs, width: bwid, height: Math.max(hs, 1) }));
      svg.append(g);
    }
    return svg;
  }

  function legend(showSystem) {
    return h('div', { class: 'legend' },
      h('span', {}, h('span', { class: 'swatch' }), 'clients'),
      showSystem ? h('span', {}, h('span', { class: 'swatch system' }), 'system users') : null);
  }

  // ---- building blocks ---------------------------------------------------

  function table(headers, rows, attrs) {
    return h('div', { class: 'table-wrap' },
      h('table', attrs || {},
        h('thead', {}, h('tr', {}, headers.map(([text, cls]) => h('th', { class: cls || null, scope: 'col' }, text)))),
        h('tbody', {}, rows)));
  }

  function stat(label, value, key) {
    return h('div', { class: 'stat' }, h('span', { class: 'value', 'data-stat': key }, fmt(value)), h('span', { class: 'label' }, label));
  }

  // command shows the CLI that prints the same thing.
  function command(args) {
    return h('p', { class: 'cmd' }, 'The same in a terminal: ', h('code', { 'data-command': '' }, args.filter(Boolean).join(' ')));
  }

  function quote(arg) {
    return /^[\w.:/=@-]+$/.test(arg) ? arg : `'${arg.replace(/'/g, "'\\''")}'`;
  }

  function commonFlags(st, hours) {
    return [hours !== 24 ? `--since ${hours}h` : '', st.cluster ? `--cluster ${quote(st.cluster)}` : ''];
  }

  function clusterNote(st) {
    return st.cluster ? ` in cluster ${st.cluster}` : '';
  }

  // ---- overview ------------------------------------------------------------

  async function renderOverview(info, st) {
    const hours = sinceHours(st, info);
    const since = `${hours}h`;
    const [list, checks] = await Promise.all([
      get('apirequestcounts', { since, hourly: 'true', cluster: st.cluster }),
      get('upgradechecks', { since, cluster: st.cluster }),
    ]);
    const items = list.items
      .map((it) => ({ it, u: use(it, st.system) }))
      .filter(({ u }) => u.day > 0 || u.win > 0)
      .sort((a, b) => byUrgency(a.it, b.it));
    const gate = await verdict(checks, st, hours);
    const breaks = new Set((gate.chosen ? gate.chosen.status.findings : [])
      .filter((f) => f.severity === 'removed' && !f.alreadyRemoved).map((f) => f.name));
    const view = [h('h1', {}, 'Deprecated APIs in use'), gate.section,
      h('p', {}, nav(href({ view: 'webhooks', api: '', user: '' }), 'Admission webhooks: slow, failing open, or with certificates kube-apiserver refuses →'))];
    const label = windowLabel(hours);
    view.push(h('h2', {}, `APIs requested in the last ${label}${clusterNote(st)}`));
    if (items.length === 0) {
      // The list holds every API with requests within the retention.
      const retention = Math.floor(hoursOf(info.retention));
      const older = list.items.length > 0 && hours < retention;
      view.push(h('p', { id: 'empty', class: 'card' }, `No deprecated API requests in the last ${label}${clusterNote(st)}` +
        (st.system ? '.' : ' from clients; system users are hidden.'),
      older ? [' ', nav(href({ since: `${retention}h` }), `Older ones are kept for ${windowLabel(retention)}: show them.`)] : null));
    } else {
      const rows = items.map(({ it, u }) => {
        const st2 = it.status;
        const name = it.metadata.name;
        return h('tr', { 'data-api': name, class: u.systemOnly ? 'system' : null },
          h('td', { class: 'name' }, nav(href({ api: name }), name), removalBadges(st2),
            breaks.has(name) ? h('span', { class: 'badge soon', 'data-breaks': '' }, `gone in ${gate.chosen.metadata.name}`) : null,
            u.systemOnly ? h('span', { class: 'badge system' }, 'system only') : null),
          h('td', { 'data-field': 'removedIn' }, st2.removedInRelease || '—'),
          h('td', { class: 'hide-narrow', 'data-field': 'replacement' }, replacementText(st2) || '—'),
          h('td', { class: 'num', 'data-count': '24h' }, fmt(u.day)),
          h('td', { class: 'num', 'data-count': 'window' }, fmt(u.win)),
          h('td', {}, spark(st2.window, st.system)));
      });
      view.push(table([['API'], ['Removed in'], ['Replacement', 'hide-narrow'], ['24 h', 'num'], [label, 'num'], [hours > 48 ? 'Per day' : 'Per hour']], rows, { id: 'apis' }));
      view.push(legend(st.system));
    }
    view.push(command(['sunset report', ...commonFlags(st, hours), st.system ? '--exclude-system=false' : '']));
    main.replaceChildren(...view);
  }

  // verdict is the upgrade gate for a target release picked from those
  // that remove an API; the API decides, with `sunset check`'s logic.
  async function verdict(checks, st, hours) {
    const items = checks.items.slice();
    let chosen = items.find((c) => c.metadata.name === st.target);
    if (!chosen && st.target) {
      try {
        chosen = await get(`upgradechecks/${encodeURIComponent(st.target)}`, { since: `${hours}h`, cluster: st.cluster });
        items.push(chosen);
      } catch (e) {
        if (!(e instanceof APIError) || e.status !== 404) throw e;
      }
    }
    // By default the first release that breaks a client, or an object the
    // cluster scan found, not broken yet, else the last known. A scan
    // finding with no release (a CRD version no longer served) breaks at
    // every target, so it picks none.
    const breaksNew = (c) => c.status.findings.some((f) => f.severity === 'removed' && !f.alreadyRemoved) ||
      (c.status.scan ? c.status.scan.findings || [] : []).some((f) => f.severity === 'removed' && !f.alreadyRemoved && f.removedInRelease);
    chosen = chosen || items.find(breaksNew) || items[items.length - 1];
    if (!chosen) return { section: h('section', { class: 'card verdict' }, 'No release to check against.') };
    const res = chosen.status;
    const select = h('select', { id: 'target', onchange: (e) => go(href({ target: e.target.value })) },
      items.map((c) => h('option', { value: c.metadata.name }, `${c.metadata.name}${c.status.exitCode === 3 ? ' (not safe)' : ''}`)));
    select.value = chosen.metadata.name;
    const scan = res.scan || null;
    const scanFindings = scan ? scan.findings || [] : [];
    const scanGaps = scan ? (scan.notScanned || []).length + (scan.errors || []).length : 0;
    // Bad when the exit code says removed (traffic or scan); else warn at
    // anything to look at: a deprecated API, a flagged certificate, a
    // scan finding, a part of the cluster the scan could not read.
    let cls = 'ok';
    if (res.exitCode === 3) cls = 'bad';
    else if (res.exitCode !== 0 || res.findings.length > 0 || (res.webhookCertificates || []).length > 0 ||
      scanFindings.length > 0 || scanGaps > 0) cls = 'warn';
    // Each caller of a finding: when it last called (the start of its
    // last hour), whether it has stopped (cleanFor), and the exemption
    // that accepts its calls, until when and why.
    const caller = (c) => h('li', { 'data-caller': c.username },
      nav(href({ user: c.username, api: '' }), c.username),
      c.lastSeen ? ` — last call in the hour from ${c.lastSeen.replace('T', ' ').replace(':00:00Z', ':00 UTC')}` : '',
      c.stopped ? h('span', { class: 'badge', 'data-stopped': '' }, `stopped (silent ${res.cleanFor})`) : null,
      c.exemption ? h('span', { class: 'badge', 'data-exemption': '' }, `exempted until ${c.exemption.expires}: ${c.exemption.reason}`) : null);
    const stale = res.staleExemptions || [];
    // One line per finding, as `sunset check` prints them; those that
    // still work after the upgrade folded away.
    const finding = (f) => h('li', { 'data-finding': f.name },
      h('span', { class: `sev-${f.severity}` }, f.severity === 'removed' ? 'Breaks: ' : 'Deprecated: '),
      nav(href({ api: f.name }), f.name), ` — ${f.warning}. `,
      h('span', { 'data-requests': '' }, plural(f.requests, 'request', 'requests')), ` by ${plural(f.clientCount, 'client', 'clients')}: `,
      f.clients.slice(0, 3).map((c, i) => [i ? ', ' : '', nav(href({ user: c, api: '' }), c)]), f.clientCount > 3 ? ', …' : '',
      f.alreadyRemoved ? h('span', { class: 'badge removed' }, 'already removed') : null,
      f.accepted ? h('span', { class: 'badge', 'data-accepted': '' }, 'not counted') : null,
      (f.callers || []).length ? h('ul', { class: 'callers' }, f.callers.map(caller)) : null);
    // A webhook server whose certificate kube-apiserver flagged, as
    // `sunset check` prints it.
    const certificate = (f) => h('li', { 'data-certificate': `${f.cluster}/${f.host}/${f.problem}` },
      h('span', { class: `sev-${f.severity === 'refused' ? 'removed' : 'deprecated'}` }, f.severity === 'refused' ? 'Refused: ' : 'Certificate: '),
      nav(href({ view: 'webhooks' }), f.host), ` in cluster ${f.cluster} — ${f.warning}. `,
      h('span', { 'data-requests': '' }, plural(f.requests, 'request', 'requests')), ` on ${f.resources.join(', ')}`);
    const certificates = res.webhookCertificates || [];
    const breaking = res.findings.filter((f) => f.severity === 'removed');
    const working = res.findings.filter((f) => f.severity !== 'removed');
    const section = h('section', { class: `card verdict ${cls}`, id: 'verdict', 'data-exit-code': res.exitCode },
      h('label', {}, 'Upgrade to Kubernetes ', select),
      h('p', { class: 'message', 'data-verdict': '' }, res.message),
      stale.length ? h('p', { 'data-stale-exemptions': '' }, `Exemptions matching no request: ${stale.map((e) => `${e.api}${e.user ? ` by ${e.user}` : ''}${e.userAgent ? ` with ${e.userAgent}` : ''}`).join('; ')}`) : null,
      breaking.length ? h('ul', {}, breaking.map(finding)) : null,
      certificates.length ? h('ul', { id: 'verdict-certificates' }, certificates.map(certificate)) : null,
      working.length ? h('details', {}, h('summary', {}, `${plural(working.length, 'deprecated API', 'deprecated APIs')} still served by ${chosen.metadata.name}`),
        h('ul', {}, working.map(finding))) : null,
      scan ? scanPart(scan, res.scanVerdict, chosen.metadata.name) : null,
      command(['sunset check --target-version', chosen.metadata.name, ...commonFlags(st, hours)]));
    return { section, chosen };
  }

  // scanObject names a scanned object as the scan's JSON does: API
  // version, kind, namespace and name.
  function scanObject(f) {
    return `${f.apiVersion} ${f.kind} ${f.namespace ? `${f.namespace}/` : ''}${f.name || ''}`.trim();
  }

  // scanOrigin says where a scan finding came from: a Helm release's
  // deployed revision and template, a CRD's stored versions, an
  // APIService, or (from `sunset check --scan`) a file.
  function scanOrigin(f) {
    const o = f.origin || {};
    const at = (path) => (o.line ? `${path}:${o.line}` : path);
    if (o.release) return `Helm release ${o.release} revision ${o.revision}${o.template ? `, template ${at(o.template)}` : ''}`;
    if (f.rule === 'crd-stored-version') return `CRD stored version: ${o.object}`;
    if (f.rule === 'apiservice') return `APIService: ${o.object}`;
    if (o.object) return o.object;
    if (o.template) return `${o.path}: ${at(o.template)}`;
    if (o.file) return `${o.path}: ${at(o.file)}`;
    return at(o.path || '');
  }

  // scannedText says what the scan read, as `sunset scan` does, so that
  // "nothing found" can be told from "nothing read".
  function scannedText(s) {
    const parts = [];
    const add = (n, one, many) => { if (n > 0) parts.push(plural(n, one, many)); };
    add(s.files, 'file', 'files');
    add(s.kustomizations, 'kustomization', 'kustomizations');
    add(s.charts, 'chart', 'charts');
    add(s.helmReleases, 'Helm release', 'Helm releases');
    add(s.customResourceDefinitions, 'CRD', 'CRDs');
    add(s.apiServices, 'APIService', 'APIServices');
    return `${parts.join(', ') || 'nothing'} (${plural(s.objects, 'object', 'objects')})`;
  }

  // scanPart is what the cluster scan found, judged at the same target:
  // its verdict, the objects that break (those still served folded away),
  // and what it could not read.
  function scanPart(scan, message, target) {
    const finding = (f) => h('li', { 'data-scan-finding': scanObject(f) },
      h('span', { class: `sev-${f.severity}` }, f.severity === 'removed' ? 'Breaks: ' : 'Deprecated: '),
      f.rule === 'crd-stored-version' ? `CRD ${f.name}, stored version ${f.apiVersion}` :
        `${f.kind} ${f.namespace ? `${f.namespace}/` : ''}${f.name || ''} (${f.apiVersion})`,
      ` — ${f.message}. `, h('span', { class: 'muted', 'data-origin': '' }, scanOrigin(f)),
      f.alreadyRemoved ? h('span', { class: 'badge removed' }, 'already removed') : null,
      f.accepted ? h('span', { class: 'badge', 'data-accepted': '' }, 'not counted') : null,
      (f.callers || []).length ? h('ul', { class: 'callers' }, f.callers.map(caller)) : null);
    const findings = scan.findings || [];
    const breaking = findings.filter((f) => f.severity === 'removed');
    const working = findings.filter((f) => f.severity !== 'removed');
    const gaps = [
      ...(scan.notScanned || []).map((n) => h('li', { 'data-not-scanned': n.namespace ? `${n.resource}/${n.namespace}` : n.resource },
        h('span', { class: 'sev-deprecated' }, 'Not scanned: '), `${n.resource} ${n.namespace ? `in namespace ${n.namespace}` : 'cluster-wide'} — ${n.reason}`)),
      ...(scan.errors || []).map((e) => h('li', { 'data-scan-error': e.path },
        h('span', { class: 'sev-deprecated' }, 'Not read: '), `${e.path} — ${e.error}`)),
    ];
    return h('div', { class: 'scan', id: 'verdict-scan' },
      h('h3', {}, 'Cluster scan: Helm releases, CRD stored versions, APIServices'),
      h('p', { class: 'message', 'data-scan-verdict': '' }, message),
      breaking.length ? h('ul', {}, breaking.map(finding)) : null,
      working.length ? h('details', {}, h('summary', {}, `${plural(working.length, 'object uses a deprecated API', 'objects use deprecated APIs')} still served by ${target}`),
        h('ul', {}, working.map(finding))) : null,
      gaps.length ? h('ul', { id: 'verdict-not-scanned' }, gaps) : null,
      h('p', { class: 'muted', 'data-scanned': '' }, `The scan read ${scannedText(scan.scanned || {})}.`));
  }

  // ---- one API -------------------------------------------------------------

  // clients adds up last24h per username and user agent, as `sunset
  // report NAME` does.
  function clients(status, showSystem) {
    const users = new Map();
    const nodes = new Map();
    const verbs = new Map();
    const known = workloadsByClient(status);
    for (const hour of status.last24h || []) {
      for (const node of hour.byNode || []) {
        const nk = `${node.cluster || ''}/${node.nodeName}`;
        const n = nodes.get(nk) || { cluster: node.cluster || '', node: node.nodeName, requests: 0 };
        n.requests += node.requestCount;
        nodes.set(nk, n);
        for (const u of node.byUser || []) {
          if (u.system && !showSystem) {
            n.requests -= u.requestCount;
            continue;
          }
          const key = `${u.username}\n${u.userAgent}`;
          const e = users.get(key) || {
            username: u.username, userAgent: u.userAgent, system: Boolean(u.system), requests: 0, dryRuns: 0,
            removed: 0, verbs: new Map(), workload: null, impersonatedBy: [], seen: new Set(),
          };
          e.requests += u.requestCount;
          e.dryRuns += u.dryRunCount || 0;
          e.removed += u.removedRequestCount || 0;
          const cw = known.get(`${node.cluster || ''}\n${key}`);
          if (cw && !e.seen.has(cw)) {
            // status.workloads lists each client once per cluster.
            e.seen.add(cw);
            e.workload = e.workload || cw.workload || null;
            for (const imp of cw.impersonatedBy || []) {
              if (!e.impersonatedBy.includes(imp.username)) e.impersonatedBy.push(imp.username);
            }
          }
          for (const v of u.byVerb || []) {
            e.verbs.set(v.verb, (e.verbs.get(v.verb) || 0) + v.requestCount);
            const tv = verbs.get(v.verb) || { requests: 0, dryRuns: 0 };
            tv.requests += v.requestCount;
            tv.dryRuns += v.dryRunCount || 0;
            verbs.set(v.verb, tv);
          }
          users.set(key, e);
        }
      }
    }
    const userList = [...users.values()].sort((a, b) => b.requests - a.requests ||
      (a.username < b.username ? -1 : a.username > b.username ? 1 : 0) || (a.userAgent < b.userAgent ? -1 : 1));
    const nodeList = [...nodes.values()].filter((n) => n.requests > 0)
      .sort((a, b) => (a.cluster + a.node < b.cluster + b.node ? -1 : 1));
    const verbList = [...verbs.entries()].sort((a, b) => (a[0] < b[0] ? -1 : 1));
    return { users: userList, nodes: nodeList, verbs: verbList };
  }

  // workloadsByClient indexes status.workloads by cluster, username and
  // user agent, the keys byUser entries share with it.
  function workloadsByClient(status) {
    const out = new Map();
    for (const cw of status.workloads || []) out.set(`${cw.cluster || ''}\n${cw.username}\n${cw.userAgent}`, cw);
    return out;
  }

  function workloadCell(w) {
    if (!w) return '—';
    const parts = [];
    if (w.namespace) parts.push(h('div', {}, `${w.namespace}/${w.serviceAccount}`));
    if (w.owner) parts.push(h('div', {}, `${w.owner.kind} ${w.owner.name}`));
    if (w.pods && w.pods.length) {
      parts.push(h('ul', { class: 'plain muted' }, w.pods.map((p) => h('li', {}, p.name, p.node ? ` on ${p.node}` : '', ` (${utc(p.lastSeen)})`))));
    }
    if (!parts.length && w.sourceIPs && w.sourceIPs.length) parts.push(h('div', { class: 'muted' }, `from ${w.sourceIPs.map((ip) => ip.ip).join(', ')}`));
    return parts.length ? parts : '—';
  }

  async function renderAPI(info, st) {
    const hours = sinceHours(st, info);
    const label = windowLabel(hours);
    let obj;
    try {
      obj = await get(`apirequestcounts/${encodeURIComponent(st.api)}`, { since: `${hours}h`, hourly: 'true', users: '100', cluster: st.cluster });
    } catch (e) {
      if (e instanceof APIError && e.status === 404) {
        main.replaceChildren(h('h1', {}, st.api), h('p', { class: 'card', id: 'empty' }, e.message), h('p', {}, nav(href({ api: '' }), 'All deprecated APIs')));
        return;
      }
      throw e;
    }
    const status = obj.status;
    const w = status.window;
    const sys = st.system ? 0 : 1;
    const day = status.requestCount - sys * (status.systemRequestCount || 0);
    const win = w.requestCount - sys * (w.systemRequestCount || 0);
    const current = status.currentHour.requestCount - sys * (status.currentHour.systemRequestCount || 0);
    const who = clients(status, st.system);
    const view = [
      h('p', {}, nav(href({ api: '' }), '← All deprecated APIs')),
      h('h1', { id: 'api-name' }, obj.metadata.name, removalBadges(status)),
      h('dl', { class: 'facts' },
        h('dt', {}, 'Removed in'), h('dd', { 'data-field': 'removedIn' }, status.removedInRelease || '— (no removal announced)'),
        h('dt', {}, 'Deprecated in'), h('dd', {}, status.deprecatedInRelease || '—'),
        h('dt', {}, 'Replacement'), h('dd', { 'data-field': 'replacement' }, replacementText(status) || '—'),
        h('dt', {}, 'Warning'), h('dd', { 'data-field': 'warning' }, status.warning || '—'),
        status.removed ? [h('dt', {}, 'Already removed'), h('dd', { class: 'error' }, `${plural(status.removedRequestCount, 'request', 'requests')} got 404 in the last 24 h: those clients are broken now.`)] : null),
      h('div', { class: 'stats' },
        stat('current hour', current, 'currentHour'),
        stat('last 24 h', day, '24h'),
        hours !== 24 ? stat(`last ${label}`, win, 'window') : null,
        stat('dry runs, 24 h', status.dryRunCount || 0, 'dryRuns'),
        st.system ? stat('by system users, 24 h', status.systemRequestCount || 0, 'system') : null),
      h('h2', {}, `Requests per hour, last ${label}${clusterNote(st)}`),
      hourlyChart(w, st.system),
      legend(st.system),
      h('h2', {}, 'Who calls it, last 24 h'),
    ];
    if (who.users.length === 0) {
      view.push(h('p', { class: 'muted' }, `No requests in the last 24 h${st.system ? '' : ' from clients'}.`));
    } else {
      view.push(table([['User'], ['User agent'], ['Requests', 'num'], ['Verbs'], ['Dry runs', 'num'], ['Workload']], who.users.map((u) =>
        h('tr', { class: u.system ? 'system' : null, 'data-user': u.username, 'data-agent': u.userAgent },
          h('td', { class: 'name' }, nav(href({ user: u.username, api: '' }), u.username), u.system ? h('span', { class: 'badge system' }, 'system') : null,
            u.impersonatedBy.length ? h('div', { class: 'muted' }, `as impersonated by ${u.impersonatedBy.join(', ')}`) : null),
          h('td', {}, u.userAgent || '—'),
          h('td', { class: 'num', 'data-count': 'requests' }, fmt(u.requests)),
          h('td', { class: 'mono' }, [...u.verbs.entries()].sort().map(([v, c]) => `${v}=${c}`).join(' ')),
          h('td', { class: 'num' }, fmt(u.dryRuns)),
          h('td', {}, workloadCell(u.workload)))), { id: 'users' }));
    }
    if (who.verbs.length) {
      view.push(h('h2', {}, 'Verbs, last 24 h'));
      view.push(table([['Verb'], ['Requests', 'num'], ['Dry runs', 'num']], who.verbs.map(([v, c]) =>
        h('tr', { 'data-verb': v }, h('td', {}, v), h('td', { class: 'num' }, fmt(c.requests)), h('td', { class: 'num' }, fmt(c.dryRuns)))), { id: 'verbs' }));
    }
    if (who.nodes.length) {
      view.push(h('h2', {}, 'Apiservers, last 24 h'));
      view.push(table([['Node'], ['Cluster'], ['Requests', 'num']], who.nodes.map((n) =>
        h('tr', { 'data-node': n.node }, h('td', {}, n.node), h('td', {}, n.cluster || '—'), h('td', { class: 'num' }, fmt(n.requests)))), { id: 'nodes' }));
    }
    const top = w.byUser.filter((u) => st.system || !u.system);
    if (top.length) {
      view.push(h('h2', {}, `Top users, last ${label}`));
      view.push(table([['User'], ['Requests', 'num'], ['User agents']], top.map((u) =>
        h('tr', { class: u.system ? 'system' : null, 'data-user': u.username },
          h('td', { class: 'name' }, nav(href({ user: u.username, api: '' }), u.username)),
          h('td', { class: 'num', 'data-count': 'window' }, fmt(u.requestCount)),
          h('td', {}, u.userAgents.join(', ') || '—'))), { id: 'window-users' }));
    }
    view.push(command(['sunset report', quote(obj.metadata.name), st.cluster ? `--cluster ${quote(st.cluster)}` : '', st.system ? '--exclude-system=false' : '']));
    main.replaceChildren(...view);
  }

  // ---- one client ----------------------------------------------------------

  async function renderUser(info, st) {
    const hours = sinceHours(st, info);
    const label = windowLabel(hours);
    const list = await get('apirequestcounts', { user: st.user, since: `${hours}h`, users: '100', cluster: st.cluster });
    const rows = [];
    let workload = null;
    let system = false;
    for (const it of list.items.slice().sort(byUrgency)) {
      const mine = (it.status.window.byUser || []).find((u) => u.username === st.user);
      system = system || Boolean(mine && mine.system);
      for (const cw of it.status.workloads || []) {
        if (cw.username === st.user && cw.workload && !workload) workload = cw.workload;
      }
      rows.push(h('tr', { 'data-api': it.metadata.name },
        h('td', { class: 'name' }, nav(href({ api: it.metadata.name, user: '' }), it.metadata.name), removalBadges(it.status)),
        h('td', {}, it.status.removedInRelease || '—'),
        h('td', { class: 'hide-narrow' }, replacementText(it.status) || '—'),
        h('td', { class: 'num', 'data-count': 'window' }, mine ? fmt(mine.requestCount) : '—'),
        h('td', {}, mine ? mine.userAgents.join(', ') : '—')));
    }
    const view = [
      h('p', {}, nav(href({ user: '' }), '← All deprecated APIs')),
      h('h1', { id: 'user-name' }, st.user, system ? h('span', { class: 'badge system' }, 'system') : null),
    ];
    if (workload) {
      view.push(h('dl', { class: 'facts' }, h('dt', {}, 'Workload'), h('dd', {}, workloadCell(workload))));
    }
    view.push(h('h2', {}, `Deprecated APIs it called in the last ${label}${clusterNote(st)}`));
    if (rows.length === 0) {
      view.push(h('p', { class: 'card', id: 'empty' }, `${st.user} called no deprecated API in the last ${label}.`));
    } else {
      view.push(table([['API'], ['Removed in'], ['Replacement', 'hide-narrow'], [`Requests, ${label}`, 'num'], ['User agents']], rows, { id: 'user-apis' }));
    }
    view.push(command(['sunset report --user', quote(st.user), `--since ${hours}h`, st.cluster ? `--cluster ${quote(st.cluster)}` : '', '-o wide']));
    main.replaceChildren(...view);
  }

  // ---- admission webhooks ------------------------------------------------

  // secs writes a latency in seconds as `sunset report webhooks` does.
  function secs(x) {
    const ms = Math.round((x || 0) * 1000);
    if (ms === 0) return '0s';
    return ms < 1000 ? `${ms}ms` : `${ms / 1000}s`;
  }

  function resourceName(r) {
    return r.subresource ? `${r.name}/${r.subresource}` : r.name;
  }

  function countCells(c) {
    return [
      h('td', { class: 'num', 'data-count': 'requests' }, fmt(c.requestCount)),
      h('td', { class: 'num', 'data-count': 'calls' }, fmt(c.callCount)),
      h('td', { class: 'num hide-narrow' }, fmt(c.mutationCount)),
      h('td', { class: 'num', 'data-count': 'failedOpen' }, fmt(c.failedOpenCount)),
      h('td', { class: 'num hide-narrow' }, fmt(c.slowRequestCount)),
      h('td', { class: 'num', 'data-count': 'latency' }, secs(c.webhookLatencySeconds)),
    ];
  }
  const countHeaders = [['Requests', 'num'], ['Calls', 'num'], ['Mutated', 'num hide-narrow'], ['Failed open', 'num'], ['Slow', 'num hide-narrow'], ['Webhook latency', 'num']];

  async function renderWebhooks(info, st) {
    const hours = sinceHours(st, info);
    const label = windowLabel(hours);
    const list = await get('webhookcounts', { since: `${hours}h`, cluster: st.cluster });
    const view = [
      h('p', {}, nav(href({ view: '' }), '← Deprecated APIs')),
      h('h1', {}, 'Admission webhooks'),
    ];
    const certs = list.certificates || [];
    if (certs.length) {
      view.push(h('h2', {}, `Webhook servers whose certificate kube-apiserver flagged, last ${label}${clusterNote(st)}`));
      view.push(h('p', { class: 'muted' }, 'kube-apiserver names the server a webhook calls (its Service as name.namespace.svc, or its URL\'s host), not the webhook. ' +
        'Replace the certificate before upgrading to the release that refuses it.'));
      view.push(table([['Server'], ['Cluster'], ['Certificate'], ['Refused by default in'], ['Refused in'], ['Requests', 'num'], ['Resources'], ['Last seen', 'hide-narrow']],
        certs.map((c) => h('tr', { 'data-certificate': `${c.cluster}/${c.host}/${c.problem}` },
          h('td', { class: 'name' }, c.host),
          h('td', {}, c.cluster),
          h('td', {}, h('span', { class: 'badge removed' }, c.problem), ` ${c.reason}`),
          h('td', {}, `${c.refusedByDefaultInRelease} (GODEBUG=${c.godebug} lets it through)`),
          h('td', { 'data-field': 'refusedIn' }, c.refusedInRelease),
          h('td', { class: 'num', 'data-count': 'requests' }, fmt(c.requestCount)),
          h('td', {}, c.byResource.map((r) => `${resourceName(r)} (${fmt(r.requestCount)})`).join(', ')),
          h('td', { class: 'hide-narrow' }, utc(c.lastSeen)))), { id: 'certificates' }));
    }
    view.push(h('h2', {}, `Resources, slowest first, last ${label}${clusterNote(st)}`));
    if (list.resources.length === 0) {
      view.push(h('p', { class: 'card', id: 'empty' }, `No admission webhook annotations in the last ${label}${clusterNote(st)}.`));
    } else {
      view.push(table([['Resource'], ['Class'], ...countHeaders], list.resources.map((r) =>
        h('tr', { 'data-resource': `${r.cluster}/${resourceName(r)}` },
          h('td', { class: 'name' }, resourceName(r), st.cluster ? null : h('div', { class: 'muted' }, r.cluster)),
          h('td', {}, (r.classes || []).join(', ') || '—'),
          countCells(r))), { id: 'webhook-resources' }));
      const rows = [];
      for (const it of list.items) {
        for (const r of (it.status.window || it.status).byResource) rows.push({ name: it.metadata.name, types: it.spec.types.join(', '), r });
      }
      rows.sort((a, b) => b.r.webhookLatencySeconds - a.r.webhookLatencySeconds || b.r.slowRequestCount - a.r.slowRequestCount ||
        b.r.callCount - a.r.callCount || (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
      view.push(h('h2', {}, `Webhooks on each resource, last ${label}`));
      view.push(table([['Webhook'], ['Type'], ['Resource'], ...countHeaders], rows.map(({ name, types, r }) =>
        h('tr', { 'data-webhook': name, 'data-resource': `${r.cluster}/${resourceName(r)}` },
          h('td', { class: 'name' }, name), h('td', {}, types), h('td', {}, resourceName(r)), countCells(r))), { id: 'webhooks' }));
    }
    view.push(command(['sunset report webhooks', ...commonFlags(st, hours)]));
    main.replaceChildren(...view);
  }

  // ---- putting it together ---------------------------------------------

  let renders = 0;
  async function render() {
    const mine = ++renders;
    root.dataset.state = 'loading';
    const st = state();
    try {
      const info = await get('serverinfo');
      if (mine !== renders) return;
      setupFilters(info, st);
      if (st.api) await renderAPI(info, st);
      else if (st.user) await renderUser(info, st);
      else if (st.view === 'webhooks') await renderWebhooks(info, st);
      else await renderOverview(info, st);
      if (mine !== renders) return;
      document.title = `${st.api || st.user || (st.view === 'webhooks' ? 'Admission webhooks' : 'Deprecated APIs in use')} · Sunset`;
      root.dataset.state = 'ready';
    } catch (e) {
      if (mine !== renders) return;
      const what = e instanceof APIError ? `Sunset answered ${e.status}: ${e.message}` : `Cannot read Sunset's API: ${e.message}`;
      main.replaceChildren(h('p', { class: 'card error', id: 'error' }, what,
        e instanceof APIError && e.status === 401 ? [' ', h('button', { type: 'button', onclick: render }, 'Enter a token')] : null));
      root.dataset.state = 'error';
    }
  }

  wireFilters();
  showForget();
  window.addEventListener('popstate', render);
  render();
})();
