import {
  Kind,
  OperationTypeNode,
  type DocumentNode,
  type FragmentDefinitionNode,
  type GraphQLError,
  type GraphQLSchema,
  type OperationDefinitionNode,
  type SelectionSetNode,
  type ValidationContext,
  type ValidationRule,
} from 'graphql';
import { getComplexity, type ComplexityEstimator } from 'graphql-query-complexity';
import { maxDepthRule } from '@escape.tech/graphql-armor-max-depth';
import { maxAliasesRule } from '@escape.tech/graphql-armor-max-aliases';
import { maxDirectivesRule } from '@escape.tech/graphql-armor-max-directives';

/**
 * Static limits checked before execution (OWASP API4): a query asking for 500 aliased lists,
 * a deeply nested one or a huge document is refused with `query_too_complex`. The same rules
 * apply over HTTP and graphql-ws. Values are documented in docs/graphql.md.
 */
export const QUERY_LIMITS = {
  maxDepth: 12,
  maxAliases: 15,
  /** Cost (see `operationCost`): objects 2, scalars 1, x1.5 per level, x `first` (nested lists multiply). */
  maxCost: 100_000,
  /** Fields visited while costing, fragments expanded: a fragment spread many times over stops here. */
  maxCostedFields: 10_000,
  maxDirectives: 50,
  /** Passed to graphql's parser (`parseOptions.maxTokens`) so it is checked once per cached document. */
  maxTokens: 2000,
} as const;

/** Report as a validation error (never throw out of the validator: that would be a 500). */
const report = {
  exposeLimits: true,
  propagateOnRejection: false,
  onReject: [(ctx: ValidationContext | null, error: GraphQLError) => ctx?.reportError(error)],
};

export function limitValidationRules(): ValidationRule[] {
  return [
    maxDepthRule({ n: QUERY_LIMITS.maxDepth, ...report }),
    maxAliasesRule({ n: QUERY_LIMITS.maxAliases, ...report }),
    maxDirectivesRule({ n: QUERY_LIMITS.maxDirectives, ...report }),
  ];
}

/**
 * graphql-armor's cost model (objects 2, scalars 1, children x1.5, a list field x its page size),
 * computed on the arguments as the resolvers will see them: variables coerced and defaults
 * applied. A static rule sees only literals, so `devices(first: $n)` with n = 1000 cost as if
 * n were 1 and 15 such lists of 500 histories each ran for seconds on the one event loop.
 */
const fieldCost: ComplexityEstimator = ({ node, args, childComplexity }) => {
  if (!node.selectionSet) return 1;
  const requested = Number(args.first ?? args.last ?? 1);
  const pageSize = Number.isFinite(requested) ? Math.max(1, requested) : 1;
  return (2 + 1.5 * childComplexity) * pageSize;
};

/**
 * The cost of the operation about to run, or `Infinity` when the document asks for more fields
 * than `maxCostedFields` once its fragments are expanded. Variables that do not coerce cost
 * nothing here: execution refuses them before any resolver runs.
 */
export function operationCost(input: {
  schema: GraphQLSchema;
  document: DocumentNode;
  operationName?: string | null | undefined;
  variables?: Record<string, unknown> | null | undefined;
}): number {
  try {
    return getComplexity({
      schema: input.schema,
      query: input.document,
      estimators: [fieldCost],
      variables: input.variables ?? {},
      maxQueryNodes: QUERY_LIMITS.maxCostedFields,
      ...(input.operationName ? { operationName: input.operationName } : {}),
    });
  } catch (error) {
    if (error instanceof Error && /maximum allowed number of nodes/.test(error.message)) return Infinity;
    return 0;
  }
}

/** The refusal of an operation over `maxCost`, worded like the other limits. */
export function costLimitMessage(cost: number): string {
  return Number.isFinite(cost)
    ? `Query Cost limit of ${QUERY_LIMITS.maxCost} exceeded, found ${Math.round(cost)}.`
    : `Query Cost limit exceeded: more than ${QUERY_LIMITS.maxCostedFields} fields once fragments are expanded.`;
}

/** Page sizes: `devices(first)` like REST's largest page, every other list smaller. */
export const MAX_DEVICE_PAGE = 1000;
export const MAX_PAGE = 500;

/**
 * Rate-limit units of one operation: each top-level field of a mutation is a command of its own
 * (15 aliased `claimDevices` are 15 claims), so it costs what 15 requests cost; a query or a
 * subscription costs 1. Fields inside fragments count; `@skip`/`@include` are not evaluated
 * (the count is what the document asks for at most); `__typename` is free.
 */
export function rateLimitUnits(document: DocumentNode, operation: OperationDefinitionNode): number {
  if (operation.operation !== OperationTypeNode.MUTATION) return 1;
  const fragments = new Map<string, FragmentDefinitionNode>();
  for (const definition of document.definitions) {
    if (definition.kind === Kind.FRAGMENT_DEFINITION) fragments.set(definition.name.value, definition);
  }
  // Validation (NoFragmentCycles) ran before this; `seen` only keeps a bad document finite.
  const seen = new Set<string>();
  const count = (selectionSet: SelectionSetNode): number => {
    let fields = 0;
    for (const selection of selectionSet.selections) {
      if (selection.kind === Kind.FIELD) {
        if (!selection.name.value.startsWith('__')) fields += 1;
      } else if (selection.kind === Kind.INLINE_FRAGMENT) {
        fields += count(selection.selectionSet);
      } else {
        const fragment = fragments.get(selection.name.value);
        if (fragment && !seen.has(fragment.name.value)) {
          seen.add(fragment.name.value);
          fields += count(fragment.selectionSet);
          seen.delete(fragment.name.value);
        }
      }
    }
    return fields;
  };
  return Math.max(1, count(operation.selectionSet));
}
