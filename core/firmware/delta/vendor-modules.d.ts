// libbzip2-wasm ships no types: what bzip2.ts uses of it.

declare module 'libbzip2-wasm' {
  interface Libbzip2Result {
    error: number;
    error_msg?: string;
    output: Uint8Array;
  }
  interface Libbzip2Module {
    then(callback: (module: Libbzip2Module) => void): void;
    onAbort?: (what: unknown) => void;
    compressBZ2(input: Uint8Array, blockSize100k: number, workFactor: number): Libbzip2Result;
  }
  const createLibbzip2: () => Libbzip2Module;
  export default createLibbzip2;
}
