// Lint for the whole repository: typescript-eslint's strict, type-aware rules for the service,
// the simulator, tests and benchmarks; eslint-plugin-vue for the portal. Formatting is
// prettier's job (eslint-config-prettier turns the rules it owns off).
import js from '@eslint/js';
import tseslint from 'typescript-eslint';
import vue from 'eslint-plugin-vue';
import prettier from 'eslint-config-prettier';
import globals from 'globals';

export default tseslint.config(
  {
    ignores: [
      'node_modules/',
      'portal/dist/',
      'dist/',
      '.ci/.node/',
      'data/',
      'coverage/',
      'bench/.out/',
      // Plain Node scripts run by the kit's own Node on a bare machine (bench/devkit/README.md).
      'bench/devkit/',
      '.devkit/',
      '.scratch/',
      '.tmp/',
      // Written by `npm run codegen` (codegen.ts); test/unit/codegen.test.ts keeps them current.
      'api/src/graphql/generated/',
      'portal/src/shared/graphql/generated/',
      'portal/src/features/*/graphql/documents.ts',
    ],
  },
  js.configs.recommended,
  ...tseslint.configs.strictTypeChecked,
  ...vue.configs['flat/recommended'],
  {
    languageOptions: {
      globals: { ...globals.node },
      parserOptions: {
        projectService: { allowDefaultProject: ['*.js', 'bin/*.js', 'portal/*.ts', 'portal/scripts/*.mjs'] },
        tsconfigRootDir: import.meta.dirname,
        extraFileExtensions: ['.vue'],
      },
    },
  },
  {
    files: ['portal/src/**/*.vue', 'portal/src/**/*.ts'],
    languageOptions: {
      globals: { ...globals.browser },
      parserOptions: { parser: tseslint.parser, extraFileExtensions: ['.vue'] },
    },
  },
  {
    rules: {
      // Template literals with numbers are how figures are written in logs and messages.
      '@typescript-eslint/restrict-template-expressions': ['error', { allowNumber: true, allowBoolean: true }],
      // `() => void promise` and `x => set.add(x)` are the idiom for callbacks whose result is dropped.
      '@typescript-eslint/no-confusing-void-expression': [
        'error',
        { ignoreArrowShorthand: true, ignoreVoidOperator: true },
      ],
      // With noUncheckedIndexedAccess on, `map.get(k)!` right after a check is the honest way to say it.
      '@typescript-eslint/no-non-null-assertion': 'off',
      // `_name` marks a parameter a signature needs but the body does not.
      '@typescript-eslint/no-unused-vars': [
        'error',
        { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrors: 'none' },
      ],
    },
  },
  {
    files: ['test/**/*.ts', 'bench/**/*.ts'],
    rules: {
      // Tests assert on parsed JSON bodies field by field.
      '@typescript-eslint/no-unsafe-member-access': 'off',
      '@typescript-eslint/no-unsafe-assignment': 'off',
      '@typescript-eslint/no-unsafe-argument': 'off',
      '@typescript-eslint/no-unsafe-call': 'off',
      '@typescript-eslint/no-unsafe-return': 'off',
      '@typescript-eslint/no-explicit-any': 'off',
    },
  },
  { files: ['**/*.js', '**/*.mjs'], ...tseslint.configs.disableTypeChecked },
  prettier,
);
