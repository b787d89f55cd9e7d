// What the demo pages do the same way: one queue of GPU jobs, so a button
// never interleaves with a training batch, one place where whatever an
// action throws is shown (#error), never left unhandled, one reading of a
// number field, and the error explorer's drawing of a failure's chain and
// of which tensors read.

export const $ = (id) => document.getElementById(id);

let queue = Promise.resolve();
/** Runs `job` after every job queued before it; resolves to its result. */
export function exclusive(job) {
  const run = queue.then(job);
  queue = run.catch(() => {});
  return run;
}

export const nextFrame = () => new Promise((resolve) => requestAnimationFrame(() => resolve()));

/**
 * The value of the number input `id`, within the input's own min and max
 * (an integer if `integer`, above 0 if `positive`). Throws a RangeError
 * naming the field otherwise: `Number('')` is 0, so an emptied width would
 * build a model with no hidden units, and a NaN learning rate would train
 * nothing. The field is marked invalid until it holds a good value.
 */
export function numberInput(id, { integer = false, positive = false } = {}) {
  const input = $(id);
  const text = input.value.trim();
  const value = Number(text);
  const [min, max] = [Number(input.min), Number(input.max)];
  const good = text !== '' && Number.isFinite(value) && (!integer || Number.isInteger(value))
    && value >= min && value <= max && (!positive || value > 0);
  input.setAttribute('aria-invalid', String(!good));
  if (good) return value;
  const name = input.closest('label').firstChild.textContent.trim();
  const range = positive ? `above ${min} and at most ${max}` : `from ${min} to ${max}`;
  const got = text === '' ? 'an empty field (or one that is not a number)' : text;
  throw new RangeError(`${name} must be ${integer ? 'an integer' : 'a number'} ${range}; got ${got}`);
}

/** Shows what an action threw, where the page's errors go. */
export function showError(error) {
  const shown = $('error');
  shown.textContent = `${error.name}: ${error.message}`;
  shown.hidden = false;
}

/** An action succeeded: the error an earlier one showed is gone. */
export function clearError() {
  const shown = $('error');
  shown.hidden = true;
  shown.textContent = '';
}

/**
 * A control's handler: `job` queued with the GPU work, what it throws
 * shown (the promise never rejects, so no rejection is left unhandled), an
 * earlier error cleared when it succeeds.
 */
export function guarded(job) {
  return () => exclusive(job).then(clearError, showError);
}

/**
 * Play and Pause for a page that trains `batch` after `batch`, a frame
 * apart, through the queue: returns `setPlaying(playing)`. `state` counts
 * `loops` running (0 or 1) and `batches` trained, and holds `playing`.
 *
 * Every Play and Pause bumps a generation. A loop trains only while the
 * generation it was started in is current, so a Pause ends it even if a
 * Play follows before the loop looks again (it used to see `playing` true
 * and go on, beside the loop the Play started: training at twice the
 * rate); a loop starts only once the last one has ended.
 */
export function player(state, batch) {
  let generation = 0;
  let lastLoop = Promise.resolve();
  const play = async (mine) => {
    state.loops += 1;
    try {
      let first = true;
      while (mine === generation) {
        await exclusive(batch);
        state.batches += 1;
        // Play was the action: its first batch succeeding clears an old error.
        if (first) clearError();
        first = false;
        await nextFrame();
      }
    } catch (error) {
      showError(error);
      if (mine === generation) setPlaying(false);
    } finally {
      state.loops -= 1;
    }
  };
  function setPlaying(playing) {
    generation += 1;
    const mine = generation;
    state.playing = playing;
    $('play').textContent = playing ? 'Pause' : 'Play';
    if (playing) lastLoop = lastLoop.then(() => play(mine));
  }
  return setPlaying;
}

/** The failure's chain as boxes in #chain: the root, each skipped op, the read. */
export function renderChain(report, cost) {
  const list = $('chain');
  list.replaceChildren();
  if (!report) return;
  const box = (cls, what, ...details) => {
    const li = document.createElement('li');
    li.className = cls;
    const head = document.createElement('div');
    head.className = 'what';
    head.textContent = what;
    li.append(head);
    for (const d of details.filter(Boolean)) {
      const div = document.createElement('div');
      div.className = 'detail';
      div.textContent = d;
      li.append(div);
    }
    list.append(li);
  };
  const { root } = report;
  box('root', `${root.kind}: ${root.op}`, root.message.split('\n')[0], report.registeredAt && `registered at ${report.registeredAt}`);
  if (report.droppedSkips > 0) box('skip', `… ${report.droppedSkips} more ops skipped`);
  for (const hop of [...report.chain].reverse()) {
    box('skip', `skipped ${hop.op}`, `needed ${hop.needed}`, `would have made ${hop.produced.join(', ')}`);
  }
  box('read', `read of tensor #${report.tensor}${cost ? ' (the cost)' : ''}`, `depth ${report.depth}, failure #${report.failureId}`, report.askedAt && `asked at ${report.askedAt}`);
}

/** Rows of `[tensor, what it is, how its read went, class]` in #tensors. */
export function renderTensors(rows) {
  const body = $('tensors').tBodies[0];
  body.replaceChildren(...rows.map(([id, what, read, cls]) => {
    const tr = document.createElement('tr');
    for (const text of [id, what, read]) {
      const td = document.createElement('td');
      td.textContent = text;
      tr.append(td);
    }
    tr.className = cls;
    return tr;
  }));
}
