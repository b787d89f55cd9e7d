// What both demo pages do the same way: one queue of GPU jobs, so a button
// never interleaves with a training batch, and one place where whatever an
// action throws is shown (#error), never left unhandled.

export const $ = (id) => document.getElementById(id);

let queue = Promise.resolve();
/** Runs `job` after every job queued before it; resolves to its result. */
export function exclusive(job) {
  const run = queue.then(job);
  queue = run.catch(() => {});
  return run;
}

export const nextFrame = () => new Promise((resolve) => requestAnimationFrame(() => resolve()));

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
