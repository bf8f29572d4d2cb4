import {
  Kind,
  OperationTypeNode,
  type DocumentNode,
  type FragmentDefinitionNode,
  type GraphQLError,
  type OperationDefinitionNode,
  type SelectionSetNode,
  type ValidationContext,
  type ValidationRule,
} from 'graphql';
import { costLimitRule } from '@escape.tech/graphql-armor-cost-limit';
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
  /** graphql-armor cost: objects 2, scalars 1, x1.5 per level, x a literal `first` argument (nested lists multiply). */
  maxCost: 100_000,
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
    costLimitRule({ maxCost: QUERY_LIMITS.maxCost, ...report }),
    maxDirectivesRule({ n: QUERY_LIMITS.maxDirectives, ...report }),
  ];
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
