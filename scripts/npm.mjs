// The npm packages of koe's test scripts, found where scripts/test.sh
// installs them: the directory in KOE_TEST_NPM_DIR, else next to the
// script that asks (a package.json installed there by hand).
import { createRequire } from 'node:module'
import path from 'node:path'
import { pathToFileURL } from 'node:url'

// loader returns load(name), which imports package name (or one of its
// exported paths, like 'openai/realtime/ws') for a script in directory
// here. The packages are ES modules: the path is resolved, then imported.
export function loader(here) {
  const roots = [process.env.KOE_TEST_NPM_DIR, here].filter(Boolean)
  return async function load(name) {
    for (const root of roots) {
      try {
        const require = createRequire(path.join(root, 'package.json'))
        return await import(pathToFileURL(require.resolve(name)).href)
      } catch (err) {
        if (err.code !== 'MODULE_NOT_FOUND' && err.code !== 'ERR_PACKAGE_PATH_NOT_EXPORTED') throw err
      }
    }
    throw new Error(`${name} is not installed in ${roots.join(' or ')} (scripts/test.sh installs it)`)
  }
}
