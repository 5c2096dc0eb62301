// ESLint over the TypeScript sources, the tests and the scripts: typescript-eslint's recommended
// rules with a few settings this codebase relies on. Layout is Prettier's job (.prettierrc.json).
import js from '@eslint/js';
import globals from 'globals';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  {
    ignores: [
      'dist/',
      'out/',
      'node_modules/',
      'test-results/',
      '.turnwise/',
      '.cache/',
      'bench-results/',
      '**/node_modules/',
      'test/fixtures/',
      'media/',
      'models/',
      'examples/',
      'sandbox-images/',
    ],
  },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    linterOptions: { reportUnusedDisableDirectives: 'error' },
    rules: {
      // `_name` marks a value kept for its position (an unused argument, a skipped tuple slot).
      '@typescript-eslint/no-unused-vars': [
        'error',
        {
          argsIgnorePattern: '^_',
          varsIgnorePattern: '^_',
          destructuredArrayIgnorePattern: '^_',
          caughtErrors: 'none',
          ignoreRestSiblings: true,
        },
      ],
      // `catch {}` is how best-effort clean-up says "nothing to do"; other empty blocks are errors.
      'no-empty': ['error', { allowEmptyCatch: true }],
    },
  },
  // Plain JavaScript run by Node: the build, test and packaging scripts.
  { files: ['**/*.mjs', '**/*.js', '**/*.cjs'], languageOptions: { globals: { ...globals.node } } },
  // The real-editor suite runs inside VS Code's extension host as CommonJS under Mocha.
  {
    files: ['test/vscode/suite/**/*.js', 'test/support/*.js'],
    languageOptions: { sourceType: 'commonjs', globals: { ...globals.node, ...globals.mocha } },
    rules: { '@typescript-eslint/no-require-imports': 'off' },
  },
);
