// koe's microphone worklet: it runs on the audio thread, turns the
// microphone's float samples into 16-bit little-endian PCM (what koe takes
// as binary WebSocket frames) and posts it to the page in chunks of 20 ms,
// each with its loudness (RMS, 0..1) for the level meter.
"use strict";
class KoeMic extends AudioWorkletProcessor {
  constructor() {
    super();
    // sampleRate is the AudioContext's rate, a global of the worklet scope.
    this.size = Math.max(128, Math.round(sampleRate * 0.02));
    this.fresh();
  }

  fresh() {
    this.buf = new ArrayBuffer(this.size * 2);
    this.view = new DataView(this.buf);
    this.n = 0;
    this.sum = 0;
  }

  process(inputs) {
    // A mono microphone has one channel; of a stereo one, the first is
    // used (the page asks for one channel).
    const x = inputs[0] && inputs[0][0];
    if (!x) return true; // not connected yet, or the track has ended
    for (let i = 0; i < x.length; i++) {
      const v = Math.max(-1, Math.min(1, x[i]));
      this.view.setInt16(this.n * 2, v < 0 ? Math.round(v * 32768) : Math.round(v * 32767), true);
      this.sum += v * v;
      if (++this.n === this.size) {
        this.port.postMessage({ pcm: this.buf, level: Math.sqrt(this.sum / this.size) }, [this.buf]);
        this.fresh();
      }
    }
    return true;
  }
}
registerProcessor("koe-mic", KoeMic);
