// The first step of a workload as a page meets it: how long it takes, and
// how long the page's thread is held at once meanwhile (its long tasks,
// over 50 ms each, as the browser reports them). `scripts/startup.mjs`
// runs it; each library's first step runs on a device of its own.
import init, { Device, tidy, train } from 'webfusion';
import * as tf from '@tensorflow/tfjs';
import { tfjsWorkload, webfusionWorkload } from './workloads.js';

export async function firstSteps(ids) {
  await init();
  await tf.setBackend('webgpu');
  await tf.ready();
  const tasks = [];
  new PerformanceObserver((list) => {
    for (const e of list.getEntries()) tasks.push({ start: e.startTime, ms: e.duration });
  }).observe({ type: 'longtask' });
  // `step`'s time, and the long tasks that overlapped it (reported a
  // moment after they end, hence the wait; the first began before it).
  const during = async (step) => {
    const t0 = performance.now();
    const done = step();
    // What the step did before its first wait: building it, and (for
    // webfusion) the flush its read asked for, up to the submit.
    const syncMs = performance.now() - t0;
    await done;
    const t1 = performance.now();
    await new Promise((resolve) => setTimeout(resolve, 200));
    const inside = tasks.filter((t) => t.start < t1 && t.start + t.ms > t0).map((t) => t.ms);
    return {
      ms: t1 - t0,
      syncMs,
      longest: Math.max(0, ...inside),
      longTasks: inside.length,
      blockedMs: inside.reduce((a, b) => a + b, 0),
    };
  };
  // The set-up (the weights and inputs made, uploaded where the library
  // uploads at once) is timed as its own task, before the first step
  // starts in a task of its own: a set-up in the step's first task was
  // counted as the step's.
  const steps = async (make) => {
    let workload;
    const setup = await during(() => { workload = make(); });
    const first = await during(workload.step);
    const second = await during(workload.step);
    return { setup, first, second };
  };
  const rows = [];
  for (const id of ids) {
    const gpu = await Device.request();
    const webfusion = await steps(() => webfusionWorkload({ tidy, train, asWritten: true }, gpu, id));
    const tfjs = await steps(() => tfjsWorkload(tf, id));
    rows.push({ id, webfusion, tfjs });
  }
  return rows;
}
